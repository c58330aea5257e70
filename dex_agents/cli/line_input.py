"""Reading the chat's typed lines while the session may print above the prompt.

What another window does (a message sent, a turn cancelled, an approval answered)
shows while a prompt waits, not once Enter is pressed. ``open_line_input`` picks
one of two readers:

- ``TerminalInput``, when standard input and output are both a terminal: it
  reads key by key (``line_editing``), so text printed with ``write`` goes
  above the prompt, and the prompt is drawn again with what was typed so far
  (also when the terminal is resized, at its new width). A line ``write`` left
  open (a model's text as it streams) shows above the prompt, and goes on there
  as more of it is written (until a resize ends it), so a prompt can wait below a
  running turn (``reads_during_turns``). Within ``keys_held`` the terminal reads key
  by key from one prompt to the next, so what is typed in between is the next one's.
- ``PipeInput`` otherwise: one thread reads whole lines, and text printed while
  a prompt waits is followed by the prompt again.

A prompt that ends without a line (its task is cancelled, because the session no
longer asks what it asked) leaves nothing of itself but a line break; a message
prompt keeps what was typed for the next message prompt. One that ends because the
person left with Ctrl-C (``leave``), or because the chat ends on an error
(``end_on_error``: the session stopped), stays shown, so what was left undecided or
unsent can still be read.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import sys
from collections.abc import Iterator

from dex_agents.cli import terminal
from dex_agents.cli.line_editing import (
    BRACKETED_PASTE_OFF,
    BRACKETED_PASTE_ON,
    Ending,
    LineEditor,
    SignalKey,
    TypedAhead,
    rows_above_cursor,
    shown,
)
from dex_agents.cli.pipe_input import PipeInput
from dex_agents.cli.terminal_modes import (
    KeyedMode,
    editing_keys,
    flush_typed,
    read_typed,
    signal_job,
    typed_signal_key,
)
from dex_agents.cli.typed_lines import LineInput


def _write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _columns() -> int:
    """How wide the terminal is; ``0`` when that is unknown."""
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        return 0


def _rewraps() -> bool:
    """Whether the terminal lays its rows out again at a new width, as most do; xterm (which
    says so in ``$XTERM_VERSION``) cuts them and keeps the cursor on its row. tmux and GNU
    screen (4.09 was tried: it lays a wrapped line out again, the cursor at its end) rewrap,
    and one started in an xterm passes that variable on to its shells: screen says it is
    there in ``$STY``, and either in ``$TERM`` (``screen...``, ``tmux...``) by default."""
    term = os.environ.get("TERM", "")
    inner = os.environ.get("TMUX") or os.environ.get("STY") or term.startswith(("screen", "tmux"))
    return bool(inner) or not os.environ.get("XTERM_VERSION")


class TerminalInput:
    """Lines typed at a terminal, read key by key while a prompt is open."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        # Bytes that are not text in the terminal's encoding become U+FFFD, as on a pipe.
        encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self._typed = ""  # read after the last line ended, for the next prompt
        self._kept = ""  # what an ended message prompt had, for the next one
        self._kept_entered = False  # its Enter was read as it ended: ``_typed`` begins with it
        self._prompt: str | None = None
        self._editor: LineEditor | None = None
        self._leaving = False
        self._ending_line = False  # a prompt that ends stays, with a line break after it
        self._above = ""  # the last line written, as shown, when no line break ended it yet
        self._above_ended = False  # by a prompt's line: ``open_line_ended``
        self._width = _columns()  # as the rows shown were laid out: a resize changes it
        self._holding = False  # within ``keys_held``
        self._held: KeyedMode | None = None  # left by the last prompt, for the next one

    async def read_line(
        self, prompt: str, *, keep_partial: bool = False, until_typed: bool = False
    ) -> str | None:
        import termios

        fd = self._fd
        # Kept from the last prompt (``keys_held``), or taken now.
        fresh = self._held is None
        mode = self._held or KeyedMode.enter(fd)
        self._held = None
        saved, keyed = mode.saved, mode.keyed
        keys = editing_keys(saved)
        editor = LineEditor(keys, self._kept if keep_partial else "")
        if keep_partial:
            self._kept, self._kept_entered = "", False
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[Ending] = loop.create_future()

        def take(typed: str) -> None:
            before = editor.text
            ending, self._typed = editor.feed(typed)
            if self._prompt is None:  # not shown until something is typed (``until_typed``)
                if editor.text or ending is Ending.END_OF_INPUT:
                    self._prompt = prompt
                    _write_out(("\n" if self._above else "") + prompt + shown(editor.text))
            elif editor.text.startswith(before):
                _write_out(shown(editor.text[len(before) :]))
            else:
                self._redraw(before)
            if isinstance(ending, SignalKey):
                # The terminal dropped what was typed after the key, as it signalled.
                self._typed = ""
                flush_typed(fd)
                signal_job(ending)
            elif ending is not None and not ended.done():
                ended.set_result(ending)

        def readable() -> None:
            if ended.done():
                return
            try:
                data = os.read(fd, 4096)
            except OSError as error:  # the terminal went away: the chat ends with one line
                ended.set_exception(error)
                return
            if not data:
                ended.set_result(Ending.END_OF_INPUT)
                return
            take(self._typed + self._decoder.decode(data))

        stopped = False  # by Ctrl-Z: the shell wrote below the prompt since

        def stop() -> None:
            # Ctrl-Z: the shell gets the terminal in the mode it gave it, then the chat stops.
            nonlocal stopped
            stopped = True
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSANOW, saved)
            _write_out(BRACKETED_PASTE_OFF)
            os.kill(os.getpid(), signal.SIGSTOP)

        def resume() -> None:
            # fg: the shell set its own mode; the prompt reads keys again, on a fresh line.
            # After bg, setting the mode stops the chat again (SIGTTOU) until fg, as a prompt
            # in the background should: reading there, it would take the shell's next line.
            nonlocal stopped
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSANOW, keyed)
            _write_out(BRACKETED_PASTE_ON)
            if stopped:
                stopped = False
                self._end_open_line()  # the shell wrote below it since
                if self._prompt is not None:
                    _write_out("\r\x1b[J" + prompt + shown(editor.text))
            else:
                # Continued without a Ctrl-Z since (the second continue of bg then fg): the
                # prompt is where it was drawn, and is erased whole, not its last row only.
                self._redraw(editor.text)

        def resized() -> None:
            # A terminal that rewraps its rows (most do) shows the prompt at its new width
            # already, and xterm, which cuts them, lost their ends: either way the prompt is
            # drawn again, erased as the terminal lays it out, on the rows it takes there.
            drawn, self._width = self._width, _columns()
            self._redraw(editor.text, self._width if _rewraps() else drawn)
            self._open_line_resized(drawn)

        # A resize between two prompts had no handler: this one is laid out at the width
        # now, which the next resize goes from (it erased as the old width laid it out).
        drawn, self._width = self._width, _columns()
        self._open_line_resized(drawn)
        self._editor = editor
        self._prompt = None if until_typed and not editor.text else prompt
        try:
            # Pasted text comes marked, so its line breaks stay in the line (line_editing).
            # Below a line left open, on a row of its own: ``write`` goes on with that line.
            marks = BRACKETED_PASTE_ON if fresh else ""
            if self._prompt is None:
                _write_out(marks)
            else:
                above = "\n" if self._above else ""
                _write_out(marks + above + prompt + shown(editor.text))
            # A chat started with Ctrl-Z ignored (no job control) is never stopped.
            if signal.getsignal(signal.SIGTSTP) is not signal.SIG_IGN:
                loop.add_signal_handler(signal.SIGTSTP, stop)
            loop.add_signal_handler(signal.SIGCONT, resume)
            loop.add_signal_handler(signal.SIGWINCH, resized)
            take(self._typed)  # after the handlers: it may hold a Ctrl-Z
            if not ended.done():
                loop.add_reader(fd, readable)
            ending = await ended
            shows = self._prompt is not None
            if ending is Ending.ENTER and "\n" in editor.text:
                # Sent, a pasted paragraph shows as its lines, as the transcript and other
                # windows show it, not as the escapes the prompt edited it with.
                self._clear()
                _write_out(prompt + terminal.escaped(editor.text, keep_newlines=True))
        except asyncio.CancelledError:
            if keep_partial:
                self._kept = editor.text
                if ended.done() and not ended.cancelled() and ended.exception() is None:
                    # The line ended as the prompt did (Enter as a turn ended): the next
                    # prompt that keeps the line reads its ending too, so it is not lost.
                    if ended.result() is not Ending.ENTER:
                        self._typed = keys.end_of_input + self._typed
                    elif self._kept:  # Enter on nothing sends nothing: not read again
                        self._typed, self._kept_entered = "\r" + self._typed, True
            if self._prompt is None:  # never shown
                if self._leaving and self._ending_line and self._above:
                    _write_out("\n")
            elif not self._leaving:
                self._clear()
                self._back_to_open_line()
            elif self._ending_line:
                _write_out("\n")
            raise
        finally:
            loop.remove_reader(fd)
            loop.remove_signal_handler(signal.SIGTSTP)
            loop.remove_signal_handler(signal.SIGCONT)
            loop.remove_signal_handler(signal.SIGWINCH)
            if self._holding:  # the next prompt reads what is typed meanwhile
                self._held = mode
            else:
                mode.restore()
            self._prompt, self._editor = None, None
        if shows:
            _write_out("\n")
            self._end_open_line()  # the prompt's line stays below it
        return None if ending is Ending.END_OF_INPUT else editor.text

    @contextlib.contextmanager
    def keys_held(self) -> Iterator[None]:
        # A prompt that ends leaves the terminal reading keys, and the next one goes on
        # with it. Put back in its line mode in between, the terminal echoed what was
        # typed as one prompt handed over to the next, and edited it itself: a Ctrl-U
        # there erased nothing, and '/quit' went on the line kept from the prompt below
        # the turn ('half typed/quit' was sent).
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            if self._held is not None:
                self._held.restore()
                self._held = None

    def _open_line_resized(self, drawn: int) -> None:
        """The terminal, ``drawn`` columns wide as the open line was laid out, was resized.

        The line left open above takes rows that a terminal that rewraps laid out again
        and one that cuts kept as they were: where their numbers differ, going back up
        into it, as what continues it does, erased a row above it or left its start twice.
        It ends there instead (on a line of its own when no prompt shows below it): what
        continues it starts a line of its own.
        """
        if self._above and self._open_line_rows(drawn) != self._open_line_rows():
            if self._prompt is None:
                _write_out("\n")
            self._end_open_line()

    def _end_open_line(self) -> None:
        if self._above:
            self._above, self._above_ended = "", True

    def _open_line_rows(self, columns: int | None = None) -> int:
        """How many rows up from the row below it the open line starts, on a terminal
        ``columns`` wide (as wide as it is now by default)."""
        # A tab moves to the next multiple of 8 columns, as terminals set their tab stops.
        return (
            rows_above_cursor(self._above.expandtabs(), _columns() if columns is None else columns)
            + 1
        )

    def _back_to_open_line(self) -> None:
        """With the prompt erased, put the cursor back at the end of the line left open
        above it, as if the prompt had never been drawn: what follows continues it."""
        if self._above:
            _write_out(f"\x1b[{self._open_line_rows()}A\r\x1b[J{self._above}")

    def _rows_up(self, typed: str, columns: int | None = None) -> int:
        if self._prompt is None:
            return 0
        shows = self._prompt + shown(typed)
        return rows_above_cursor(shows, _columns() if columns is None else columns)

    def _clear(self, typed: str | None = None, columns: int | None = None) -> None:
        """Erase the open prompt and what was typed at it; the cursor ends where it began.

        ``typed`` is the text the prompt shows, when the line was edited since: the rows
        to erase are those of what is shown, not of what the line now holds. ``columns``
        is the width its rows are laid out at, when not the terminal's width now.
        """
        if typed is None:
            typed = self._editor.text if self._editor else ""
        rows = self._rows_up(typed, columns)
        _write_out((f"\x1b[{rows}A" if rows else "") + "\r\x1b[J")

    def _redraw(self, shown_before: str, columns: int | None = None) -> None:
        if self._prompt is None or self._editor is None:
            return
        self._clear(shown_before, columns)
        _write_out(self._prompt + shown(self._editor.text))

    def write(self, text: str) -> None:
        if self._prompt is None:
            _write_out(text)
        else:
            self._clear()
            self._back_to_open_line()
            _write_out(text)
        _, line_break, after = text.rpartition("\n")
        self._above = after if line_break else self._above + after
        if self._prompt is not None:
            # What goes on writing the open line is written again with it, then the prompt.
            above = "\n" if self._above else ""
            _write_out(above + self._prompt + shown(self._editor.text if self._editor else ""))

    def leave(self) -> None:
        self._leaving = True

    def end_on_error(self) -> None:
        self._leaving = self._ending_line = True

    @property
    def reads_during_turns(self) -> bool:
        return True

    def open_line_ended(self) -> bool:
        ended, self._above_ended = self._above_ended, False
        return ended

    def discard_typed_ahead(self) -> TypedAhead:
        # A line entered as the prompt below the turn ended keeps its text for the next
        # message prompt: only its Enter goes, and the line is not to be typed again.
        entered, typed = self._kept_entered, self._typed
        if entered:
            typed = typed.removeprefix("\r")
        self._typed, self._kept_entered = "", False
        if self._held is not None:
            # Typed as the last prompt ended, the keys wait as keys: a Ctrl-C, Ctrl-\ or
            # Ctrl-Z among them still signals, as the terminal in its line mode did.
            typed += self._decoder.decode(read_typed(self._fd))
            key = typed_signal_key(typed, editing_keys(self._held.saved))
            if key is SignalKey.SUSPEND:
                # The shell gets the terminal in the mode it gave it, as at a prompt
                # (``stop``), and the next prompt takes it again after fg: held, the chat
                # stopped with it reading keys, and after fg its prompt read in bash's line mode.
                self._held.restore()
                self._held = None
            if key is not None:
                signal_job(key)
        self._decoder.reset()
        return TypedAhead(dropped=flush_typed(self._fd) or bool(typed), entered_line=entered)


def open_line_input() -> LineInput:
    """``TerminalInput`` when standard input and output are a terminal, else ``PipeInput``."""
    if sys.stdin is None:  # closed: read as the end of input, as an empty pipe is
        return PipeInput()
    try:
        import termios  # noqa: F401  POSIX only

        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return PipeInput()
        if os.isatty(sys.stdout.fileno()):
            return TerminalInput(fd)
        return PipeInput(terminal=fd)
    except (ImportError, OSError, ValueError):
        return PipeInput()
