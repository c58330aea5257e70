"""The chat edits a typed line as the terminal's line discipline did, key by key."""

from __future__ import annotations

import pytest

from dex_agents.cli.line_editing import (
    EditingKeys,
    Ending,
    LineEditor,
    display_width,
    rows_above_cursor,
    shown,
)

KEYS = EditingKeys()


@pytest.mark.parametrize(
    ("typed", "text"),
    [
        ("refund order 7", "refund order 7"),
        ("refund orderx\x7f 7", "refund order 7"),
        ("refund orderx\b 7", "refund order 7"),
        ("something\x15where is", "where is"),
        ("where is my  \x17order", "where is order"),
        ("where\x1b[Dis\x1bOA order\x1b[1;5C", "whereis order"),
        ("a\tb", "a\tb"),
        ("a\x07\x00b", "ab"),
        ("\x04", ""),
    ],
    ids=repr,
)
def test_keys_edit_the_line(typed: str, text: str) -> None:
    editor = LineEditor(KEYS)
    assert editor.feed(typed) == (None if typed != "\x04" else Ending.END_OF_INPUT, "")
    assert editor.text == text


def test_enter_ends_the_line_and_leaves_the_rest_for_the_next() -> None:
    editor = LineEditor(KEYS, "where is")
    assert editor.feed(" order 7\nyes\n") == (Ending.ENTER, "yes\n")
    assert editor.text == "where is order 7"


def test_end_of_input_ends_only_an_empty_line() -> None:
    editor = LineEditor(KEYS)
    assert editor.feed("ab\x04") == (None, "")
    assert editor.feed("\x15\x04rest") == (Ending.END_OF_INPUT, "rest")


def test_an_escape_sequence_split_between_reads_is_still_dropped() -> None:
    editor = LineEditor(KEYS, "a")
    assert editor.feed("\x1b") == (None, "")
    assert editor.feed("[1;") == (None, "")
    assert editor.feed("5Db") == (None, "")
    assert editor.text == "ab"


def test_the_terminals_own_keys_are_used() -> None:
    editor = LineEditor(
        EditingKeys(erase="\x08", kill="\x18", word_erase="\x17", end_of_input="\x1a")
    )
    editor.feed("ab\x08c x\x18d")
    assert editor.text == "d"


def test_what_is_shown_has_a_known_width() -> None:
    assert shown("a\tb\x1b[31m") == "a b\\x1b[31m"
    assert display_width("日本") == 4
    assert display_width("e\u0301") == 1


@pytest.mark.parametrize(
    ("text", "columns", "rows"),
    [
        ("", 80, 0),
        ("a" * 5, 80, 0),
        ("a" * 80, 80, 0),
        ("a" * 81, 80, 1),
        ("a" * 161, 80, 2),
        ("a" * 200, 0, 0),
        ("a" * 78 + "日", 80, 0),  # the wide character fills the row
        ("a" * 79 + "日", 80, 1),  # one column left: the wide character starts the next row
        ("a" * 79 + "日" + "b" * 79, 80, 2),
        ("e\u0301" * 80, 80, 0),  # combining marks take no column
    ],
)
def test_rows_above_the_cursor_count_wrapped_rows(text: str, columns: int, rows: int) -> None:
    assert rows_above_cursor(text, columns) == rows
