"""Lone surrogates: refused from the caller, escaped (losslessly) in the canonical JSON."""

from __future__ import annotations

import json
import os

import pytest

from dex_agents.domain.canonical_json import dumps
from dex_agents.domain.unicode_text import (
    escape_lone_surrogates,
    first_lone_surrogate,
    join_surrogate_pairs,
    require_storable_text,
)

FILE_NAME = os.fsdecode(b"report-\xff.txt")  # 'report-\udcff.txt' on a UTF-8 file system


@pytest.mark.parametrize(
    ("text", "index"),
    [("", None), ("plain", None), ("naïve 😀", None), (FILE_NAME, 7), ("\ud800x", 0)],
)
def test_first_lone_surrogate(text: str, index: int | None) -> None:
    assert first_lone_surrogate(text) == index


def test_require_storable_text_names_the_argument_and_the_code_point() -> None:
    assert require_storable_text("send_user_message", "text", "fine") == "fine"
    with pytest.raises(ValueError, match=r"send_user_message: text .* U\+DCFF at index 7"):
        require_storable_text("send_user_message", "text", FILE_NAME)


def test_the_canonical_json_of_a_surrogate_is_utf8_and_decodes_to_the_same_text() -> None:
    text = dumps({"output": FILE_NAME, "key\udc80": "é"})
    text.encode("utf-8")  # no UnicodeEncodeError: it can be stored
    assert "\\udcff" in text
    assert "é" in text  # other non-ASCII text stays unescaped
    assert json.loads(text) == {"output": FILE_NAME, "key\udc80": "é"}


def test_text_without_surrogates_is_unchanged() -> None:
    assert escape_lone_surrogates('{"a":"b ü"}') == '{"a":"b ü"}'


@pytest.mark.parametrize(
    ("text", "joined"),
    [
        ("plain", "plain"),
        ("a\ud83d" + "\ude00b", "a\U0001f600b"),  # the halves of one emoji, sent apart
        ("\ud83dx\ude00", "\ud83dx\ude00"),  # not adjacent: no pair
        ("\ude00\ud83d", "\ude00\ud83d"),  # low before high: no pair
        (FILE_NAME, FILE_NAME),
    ],
)
def test_join_surrogate_pairs(text: str, joined: str) -> None:
    assert join_surrogate_pairs(text) == joined
