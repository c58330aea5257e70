"""The session ID rule: non-empty, not blank, no '/', no control character, at most 256 bytes."""

from __future__ import annotations

import pytest

from dex_agents.domain.errors import DexAgentsError, InvalidSessionIdError
from dex_agents.domain.session_ids import MAX_SESSION_ID_BYTES, validate_session_id


@pytest.mark.parametrize(
    "session_id",
    [
        "s1",
        "session-42",
        "0b8f5a4e-3c8d-4f7e-9a52-7d1c2e6f9b10",
        "user:alice@example.com",
        "grüße",
        "日本語のセッション",
        "a b",  # inner spaces are ordinary text
        " padded ",  # so are outer ones: only an all-blank ID is refused
        "emoji-👩‍💻",  # the zero-width joiner (Cf) is allowed on purpose
        "rtl-\u202eabc",  # so are the bidirectional controls (Cf)
        "x" * MAX_SESSION_ID_BYTES,
        "é" * (MAX_SESSION_ID_BYTES // 2),  # two bytes each: exactly at the limit
    ],
)
def test_valid_session_ids_are_returned_unchanged(session_id: str) -> None:
    assert validate_session_id(session_id) is session_id


@pytest.mark.parametrize(
    ("session_id", "message"),
    [
        ("", "it is empty"),
        (" ", "it is blank"),
        ("\t \u3000", "it is blank"),
        ("a/b", "it contains '/'"),
        ("/", "it contains '/'"),
        ("s1/", "it contains '/'"),
        ("a\x00b", "control character U\\+0000 at index 1"),
        ("a\nb", "control character U\\+000A at index 1"),
        ("\x1b[31mred", "control character U\\+001B at index 0"),
        ("del\x7f", "control character U\\+007F at index 3"),
        ("c1\x85", "control character U\\+0085 at index 2"),
        ("lone\ud800", "lone surrogate U\\+D800 at index 4"),
        ("x" * (MAX_SESSION_ID_BYTES + 1), "257 bytes as UTF-8, more than MAX_SESSION_ID_BYTES"),
        ("é" * (MAX_SESSION_ID_BYTES // 2 + 1), "258 bytes as UTF-8"),
    ],
    ids=repr,
)
def test_invalid_session_ids_are_refused_naming_the_fault(session_id: str, message: str) -> None:
    with pytest.raises(InvalidSessionIdError, match=message) as caught:
        validate_session_id(session_id)
    assert str(caught.value).startswith("invalid session ID ")
    # The message shows the ID escaped, so it never carries the control character itself.
    assert "\x1b" not in str(caught.value)


@pytest.mark.parametrize("session_id", [123, None, b"s1", ["s1"], 1.5, True])
def test_a_session_id_that_is_not_a_str_is_a_type_error(session_id: object) -> None:
    with pytest.raises(
        TypeError, match=f"a session ID must be a str, not {type(session_id).__name__}"
    ):
        validate_session_id(session_id)  # type: ignore[arg-type]


def test_the_error_is_a_value_error_of_dex_agents() -> None:
    assert issubclass(InvalidSessionIdError, ValueError)
    assert issubclass(InvalidSessionIdError, DexAgentsError)
    assert MAX_SESSION_ID_BYTES == 256


def test_a_long_id_is_shown_shortened() -> None:
    with pytest.raises(InvalidSessionIdError) as caught:
        validate_session_id("x" * 10_000)
    assert len(str(caught.value)) < 200
