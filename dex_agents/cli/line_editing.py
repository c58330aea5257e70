"""Editing one typed line from the keys a terminal sends, as its line discipline would.

At a prompt the chat reads the terminal key by key (not line by line), so that it
can print what another window does above the prompt and draw the prompt again
with what was typed so far. It then does the editing the terminal did before:
the erase, kill and word-erase keys of the terminal's settings, end of input at
the start of a line, and Enter. Escape sequences (arrow keys, function keys) are
dropped whole, as a line discipline would have kept them as text the session
would then be sent. Text the terminal marks as pasted (bracketed paste, which the
prompt turns on) keeps its line breaks as text: a pasted paragraph is one line,
not one message a line, and a Ctrl-C in it is not a key. The keys that signal the
chat's job (Ctrl-C, Ctrl-\\, Ctrl-Z) come back from ``feed`` for the reader to send
their signals. The erase key takes what shows as one character, as line editors do
(``text_width.units``), where the terminal took one code point. The cursor stays at
the end of the line.
"""

from __future__ import annotations

import enum
import unicodedata
from dataclasses import dataclass

from dex_agents.cli import terminal
from dex_agents.cli.text_width import units, without_last_unit


class Ending(enum.Enum):
    """How a line ended."""

    ENTER = "enter"
    END_OF_INPUT = "end_of_input"
    """The end-of-input key (Ctrl-D) at the start of a line."""


class SignalKey(enum.Enum):
    """A key that signals the chat's job, as the terminal signalled it before (``ISIG``),
    read where it was typed rather than pasted; the line goes on."""

    INTERRUPT = "interrupt"
    """Ctrl-C."""
    QUIT = "quit"
    """Ctrl-\\."""
    SUSPEND = "suspend"
    """Ctrl-Z."""


@dataclass(frozen=True)
class EditingKeys:
    """The terminal's editing characters (``termios`` ``VERASE``, ``VKILL``, ...), and
    those that signal its job (``VINTR``, ``VQUIT``, ``VSUSP``; empty: none)."""

    erase: str = "\x7f"
    kill: str = "\x15"
    word_erase: str = "\x17"
    end_of_input: str = "\x04"
    interrupt: str = ""
    quit: str = ""
    suspend: str = ""


@dataclass(frozen=True)
class TypedAhead:
    """What the prompt of a decision dropped of what was typed before it showed
    (``LineInput.discard_typed_ahead``): typed then, it would decide what its writer
    never saw."""

    dropped: bool = False
    """Keys were dropped: to be typed again."""
    entered_line: bool = False
    """The prompt below the turn read the Enter of its line as the turn ended at the
    decision: the Enter was dropped, and the line comes back, not sent, at the next
    message prompt."""


_BACKSPACE = "\b"
_ESCAPE = "\x1b"

BRACKETED_PASTE_ON = "\x1b[?2004h"
"""Asks the terminal to mark pasted text with ``ESC [200~`` and ``ESC [201~``."""
BRACKETED_PASTE_OFF = "\x1b[?2004l"


class _Escape(enum.Enum):
    NONE = 0
    STARTED = 1  # ESC read
    CONTROL = 2  # ESC [: parameters until a final byte
    ONE_MORE = 3  # ESC O: one more character


class LineEditor:
    """One line being typed: ``feed`` applies keys until Enter, end of input or a
    signal key."""

    def __init__(self, keys: EditingKeys, text: str = "") -> None:
        self._keys = keys
        self._text = text
        # Characters added since ``text`` was last read, joined once when it is: adding
        # them one at a time copied the whole line each time, and a pasted megabyte took
        # minutes, with the chat deaf to everything else meanwhile.
        self._added: list[str] = []
        self._escape = _Escape.NONE
        self._parameters = ""  # of the control sequence being read
        self._pasting = False
        self._after_return = False  # the last pasted key was a carriage return

    @property
    def text(self) -> str:
        """The line as edited so far."""
        if self._added:
            self._text += "".join(self._added)
            self._added.clear()
        return self._text

    @text.setter
    def text(self, text: str) -> None:
        self._added.clear()
        self._text = text

    def feed(self, typed: str) -> tuple[Ending | SignalKey | None, str]:
        """Apply ``typed`` until the line ends or a signal key is read; how it ended, or
        that key (``None`` while it goes on), and what was typed after it."""
        for index, key in enumerate(typed):
            ending = self._key(key)
            if ending is not None:
                return ending, typed[index + 1 :]
        return None, ""

    def _key(self, key: str) -> Ending | SignalKey | None:
        if self._escape is not _Escape.NONE and self._in_escape(key):
            return None
        if self._pasting:
            self._pasted(key)  # a pasted Ctrl-C is text the terminal let through, not a key
            return None
        keys = self._keys
        signalling = (keys.interrupt, keys.quit, keys.suspend)
        if key in signalling:  # never matched by a key the terminal does not have (empty)
            return (SignalKey.INTERRUPT, SignalKey.QUIT, SignalKey.SUSPEND)[signalling.index(key)]
        if key in "\n\r":
            return Ending.ENTER
        if key == keys.end_of_input:
            # Mid-line the terminal would hand over the line without a line break; a
            # line is only sent on Enter here, so the key does nothing there.
            return Ending.END_OF_INPUT if not self.text else None
        if key in (keys.erase, _BACKSPACE):
            # What shows as one character goes whole (an emoji and its selector, a letter
            # and its accent), not just its last code point.
            self.text = without_last_unit(self.text)
        elif key == keys.kill:
            self.text = ""
        elif key == keys.word_erase:
            kept = self.text.rstrip()
            self.text = kept[: len(kept) - len(kept.split()[-1])] if kept else ""
        elif key == _ESCAPE:
            self._escape = _Escape.STARTED
        elif key == "\t" or unicodedata.category(key) != "Cc":
            self._added.append(key)
        return None

    def _pasted(self, key: str) -> None:
        after_return, self._after_return = self._after_return, key == "\r"
        if key == _ESCAPE:
            self._escape = _Escape.STARTED
        elif key == "\n" and after_return:
            pass  # a Windows line end: one line break
        elif key in "\r\n":
            self._added.append("\n")
        elif key == "\t" or unicodedata.category(key) != "Cc":
            self._added.append(key)

    def _in_escape(self, key: str) -> bool:
        """Read ``key`` in the escape sequence begun; whether it was part of it.

        An escape, a control character or a non-ASCII character cannot be part of a
        sequence: it ends a cut one (a log copied with half a colour code, the Escape key
        alone) and is read for itself, as terminals read it. Taken into the sequence, it
        hid the paste's end mark, and every Enter after it was a pasted line break: the
        line could no longer be sent.
        """
        if key == _ESCAPE:
            self._escape = _Escape.STARTED
            return True
        if not " " <= key <= "\x7e":
            self._escape = _Escape.NONE
            return False
        if self._escape is _Escape.STARTED:
            if key == "[":
                self._escape, self._parameters = _Escape.CONTROL, ""
            elif key == "O":
                self._escape = _Escape.ONE_MORE
            else:
                self._escape = _Escape.NONE  # Alt and a key: dropped
        elif self._escape is _Escape.ONE_MORE:
            self._escape = _Escape.NONE
        elif "\x40" <= key <= "\x7e":
            self._escape = _Escape.NONE
            if key == "~" and self._parameters in ("200", "201"):  # a paste starts or ends
                self._pasting, self._after_return = self._parameters == "200", False
        else:
            self._parameters += key
        return True


def shown(text: str) -> str:
    """``text`` as the prompt shows it: a tab as one space, anything else a terminal would
    act on escaped (``terminal.escaped``), so the width of what is shown is known."""
    return terminal.escaped(text.replace("\t", " "))


def rows_above_cursor(text: str, columns: int) -> int:
    """How many rows above the cursor a prompt line showing ``text`` (as ``shown`` gives
    it) started, on a terminal ``columns`` wide; none when the width is unknown (``0``,
    as a terminal that was never sized says).

    The cursor stays on the last column of a full row, and a wide character with one
    column left on its row starts the next one, leaving that column empty: counting
    columns alone left a line's first row on the screen when it was erased. Widths are
    those of ``text_width``.
    """
    if columns <= 0:
        return 0
    row = column = 0
    for _, width in units(text):
        if width and column + width > columns:
            row, column = row + 1, 0
        column += width
    return row
