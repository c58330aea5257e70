"""The chat edits a typed line as the terminal's line discipline did, key by key."""

from __future__ import annotations

import pytest

from dex_agents.cli.line_editing import (
    EditingKeys,
    Ending,
    LineEditor,
    SignalKey,
    rows_above_cursor,
    shown,
)
from dex_agents.cli.text_width import display_width

KEYS = EditingKeys()


@pytest.mark.parametrize(
    ("typed", "text"),
    [
        ("refund order 7", "refund order 7"),
        ("refund orderx\x7f 7", "refund order 7"),
        ("refund orderx\b 7", "refund order 7"),
        ("love \u2764\ufe0f\x7f", "love "),  # the emoji goes whole, not its selector alone
        ("cafe\u0301\x7f", "caf"),  # the letter goes with its accent
        ("\U0001f1eb\U0001f1f7\U0001f1e9\x7f\x7f", ""),  # a lone indicator, then the flag
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


def test_pasted_line_breaks_are_text_and_enter_ends_the_line() -> None:
    editor = LineEditor(KEYS, "see: ")
    pasted = "\x1b[200~Traceback:\r\n  File x\rError\x15\x1b[D\x1b[201~"
    assert editor.feed(pasted) == (None, "")
    assert editor.text == "see: Traceback:\n  File x\nError"
    assert editor.feed("\x7f\rnext") == (Ending.ENTER, "next")
    assert editor.text == "see: Traceback:\n  File x\nErro"


@pytest.mark.parametrize(
    ("typed", "text"),
    [
        ("\x1b[200~log \x1b[1\x1b[201~", "log "),  # half a colour code at the paste's end
        ("\x1b[200~log\x1b\x1b[201~", "log"),  # an escape alone
        ("\x1b[200~log \x1b[\u00e9t\x1b[201~", "log \u00e9t"),  # not a sequence's byte
        ("\x1b[200~a\x1b[1\rb\x1b[201~", "a\nb"),  # a line break ends a cut sequence
    ],
    ids=ascii,
)
def test_a_paste_holding_a_cut_escape_sequence_still_ends(typed: str, text: str) -> None:
    editor = LineEditor(KEYS)
    assert editor.feed(typed) == (None, "")
    # Before, the cut sequence took in the paste's end mark: every Enter after it was a
    # pasted line break, and the line could not be sent.
    assert editor.feed("\rnext") == (Ending.ENTER, "next")
    assert editor.text == text


def test_enter_after_the_escape_key_ends_the_line() -> None:
    editor = LineEditor(KEYS, "where is")
    # Before, the escape key took Enter as the rest of its sequence, and dropped it.
    assert editor.feed("\x1b\r") == (Ending.ENTER, "")
    assert editor.text == "where is"


def test_a_large_paste_read_in_many_pieces_is_edited_as_typed_at_once() -> None:
    pasted = "\x1b[200~" + "word word\r\n" * 30_000 + "last\x1b[201~"
    keys = pasted + "\x7f\x7f x\x17 end\rnext"
    editor = LineEditor(KEYS, "see: ")
    results = [editor.feed(keys[start : start + 4096]) for start in range(0, len(keys), 4096)]
    assert [ending for ending, _ in results if ending is not None] == [Ending.ENTER]
    assert editor.text == "see: " + "word word\n" * 30_000 + "la  end"


SIGNALLING = EditingKeys(interrupt="\x03", quit="\x1c", suspend="\x1a")


@pytest.mark.parametrize(
    ("key", "signal_key"),
    [("\x03", SignalKey.INTERRUPT), ("\x1c", SignalKey.QUIT), ("\x1a", SignalKey.SUSPEND)],
    ids=repr,
)
def test_a_typed_signal_key_comes_back_and_the_line_goes_on(
    key: str, signal_key: SignalKey
) -> None:
    editor = LineEditor(SIGNALLING, "where")
    assert editor.feed(f" is{key}rest") == (signal_key, "rest")
    assert editor.text == "where is"
    assert editor.feed(" order\r") == (Ending.ENTER, "")
    assert editor.text == "where is order"


def test_a_pasted_signal_key_is_dropped_as_the_other_pasted_controls() -> None:
    editor = LineEditor(SIGNALLING)
    assert editor.feed("\x1b[200~line one\x03\x1c\x1a line two\x1b[201~") == (None, "")
    assert editor.text == "line one line two"


def test_a_terminal_without_signal_keys_has_them_as_controls() -> None:
    editor = LineEditor(KEYS)  # as a terminal set with stty -isig
    assert editor.feed("a\x03\x1cb") == (None, "")
    assert editor.text == "ab"


def test_the_terminals_own_keys_are_used() -> None:
    editor = LineEditor(
        EditingKeys(erase="\x08", kill="\x18", word_erase="\x17", end_of_input="\x1a")
    )
    editor.feed("ab\x08c x\x18d")
    assert editor.text == "d"


def test_what_is_shown_has_a_known_width() -> None:
    assert shown("a\tb\x1b[31m") == "a b\\x1b[31m"


# The widths the wcwidth library's wcswidth (0.7) gives, which terminals that draw emoji
# sequences follow.
@pytest.mark.parametrize(
    ("text", "columns"),
    [
        ("a", 1),
        ("日本", 4),  # wide
        ("\u3000", 2),  # full-width space
        ("e\u0301", 1),  # a combining accent
        ("\u200b", 0),  # zero width space
        ("a\u00adb", 3),  # a soft hyphen shows
        ("\u1100\u1161\u11a8", 2),  # a Hangul syllable of conjoining letters
        ("\u2764", 1),  # a heart in text style
        ("\u2764\ufe0f", 2),  # variation selector 16: the emoji
        ("\u2600\ufe0f", 2),
        ("\u2600\ufe0e", 1),  # variation selector 15: text style
        ("\u263a\ufe0fx", 3),
        ("1\ufe0f\u20e3", 2),  # a keycap
        ("a\ufe0f", 1),  # a letter has no emoji style
        ("\U0001f44d", 2),
        ("\U0001f44d\U0001f3fd", 2),  # a skin tone joins its emoji
        ("a\U0001f3fd", 3),  # but not a letter
        ("\U0001f468\u200d\U0001f469\u200d\U0001f467", 2),  # joined emoji
        ("\U0001f3f3\ufe0f\u200d\U0001f308", 2),
        ("\U0001f9d1\U0001f3fd\u200d\U0001f4bb", 2),
        ("\U0001f1eb\U0001f1f7", 2),  # a flag
        ("\U0001f1eb\U0001f1f7\U0001f1e9", 4),  # a flag and a regional indicator alone
    ],
    ids=ascii,
)
def test_text_takes_the_columns_a_terminal_gives_it(text: str, columns: int) -> None:
    assert display_width(text) == columns


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
        ("a" * 78 + "\u2764\ufe0f", 80, 0),  # the emoji fills the row
        ("a" * 79 + "\u2764\ufe0f", 80, 1),  # one column left: the emoji starts the next row
        ("a" * 79 + "\u2764\ufe0f" + "b" * 78, 80, 1),
        ("a" * 79 + "\u2764\ufe0f" + "b" * 79, 80, 2),
        ("\U0001f44d\U0001f3fd" * 40, 80, 0),  # two columns each, not four
    ],
)
def test_rows_above_the_cursor_count_wrapped_rows(text: str, columns: int, rows: int) -> None:
    assert rows_above_cursor(text, columns) == rows
