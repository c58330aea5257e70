"""The terminal settings the chat's key-by-key prompt relies on and puts back.

``line_input.TerminalInput`` takes the terminal out of its line mode while a prompt
waits, and within ``keys_held`` from one prompt to the next (``KeyedMode``,
``keyed_mode``); these helpers read its editing keys, drop what was typed ahead, send
the signal of a typed Ctrl-C, Ctrl-\\ or Ctrl-Z, and put its mode back before a signal
ends the chat.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import sys
from dataclasses import dataclass
from typing import Any

from dex_agents.cli.line_editing import BRACKETED_PASTE_OFF, EditingKeys, LineEditor, SignalKey

# Signals that end the chat where it is: kill's default, a closed terminal window, Ctrl-\
# (by name: a platform without terminals lacks some, and this module still imports there).
_ENDING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name)
)


def restore_before_ending(fd: int, saved: list[Any]) -> list[signal.Signals]:
    """Have each of ``_ENDING_SIGNALS`` at its default put terminal ``fd`` back in mode
    ``saved`` first, then end the chat as it did; the signals whose handler was set.

    Their default ends the process at once, which left the shell a terminal that neither
    echoed nor read lines. A Python handler, not the loop's: one that arrives as the prompt
    ends still ends the chat, rather than finding the loop's handler already gone.
    """
    import termios

    def restore_and_end(number: int, _frame: object) -> None:
        # A chat stopped with Ctrl-Z put the mode back already, and ``kill %1`` resumes it
        # in the background, where setting the mode would stop it again instead of ending.
        if in_foreground(fd):
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSANOW, saved)
            with contextlib.suppress(OSError, ValueError):  # no paste marks; a new line
                os.write(sys.stdout.fileno(), b"\x1b[?2004l\n")
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)

    handled: list[signal.Signals] = []
    for number in _ENDING_SIGNALS:
        if signal.getsignal(number) is signal.SIG_DFL:  # not one ignored, as nohup does
            signal.signal(number, restore_and_end)
            handled.append(number)
    return handled


def in_foreground(fd: int) -> bool:
    """Whether this process may set terminal ``fd``'s mode without being stopped for it
    (``SIGTTOU``): its job is in the foreground, or ``fd`` is not its controlling terminal."""
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:  # not its controlling terminal: no job control stops it
        return True


def flush_typed(fd: int) -> bool:
    """Drop the lines waiting in terminal ``fd``'s input queue; whether there were any."""
    try:
        import fcntl  # POSIX only, as a terminal's input queue is
        import termios

        waiting = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if waiting <= 0:
            return False
        termios.tcflush(fd, termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        return False
    return True


def read_typed(fd: int) -> bytes:
    """What waits in terminal ``fd``'s input queue, read without waiting for more (the
    terminal reads key by key: in its line mode a line not ended yet would wait)."""
    try:
        import fcntl  # POSIX only, as a terminal's input queue is
        import termios

        waiting = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        return os.read(fd, waiting) if waiting > 0 else b""
    except (ImportError, OSError, ValueError):
        return b""


def terminal_key(value: object, default: str) -> str:
    """A ``termios`` control character as text; ``default`` when the terminal has none."""
    if isinstance(value, bytes) and value not in (b"", b"\0"):
        return value.decode("latin-1")
    return default


def editing_keys(saved: list[Any]) -> EditingKeys:
    """The editing keys of terminal mode ``saved`` (as ``termios.tcgetattr`` gives it), and
    the keys that signal its job when it has them signal (``ISIG``)."""
    import termios

    characters = saved[6]
    signals = bool(saved[3] & termios.ISIG)
    return EditingKeys(
        erase=terminal_key(characters[termios.VERASE], "\x7f"),
        kill=terminal_key(characters[termios.VKILL], "\x15"),
        word_erase=terminal_key(characters[termios.VWERASE], "\x17"),
        end_of_input=terminal_key(characters[termios.VEOF], "\x04"),
        interrupt=terminal_key(characters[termios.VINTR], "") if signals else "",
        quit=terminal_key(characters[termios.VQUIT], "") if signals else "",
        suspend=terminal_key(characters[termios.VSUSP], "") if signals else "",
    )


def keyed_mode(saved: list[Any]) -> list[Any]:
    """Terminal mode ``saved`` as the prompt reads it, key by key without echo.

    Enter comes as a carriage return, told apart from a pasted line feed (CR LF is one line
    break of a paste, not two). The keys that signal the job come as keys too
    (``editing_keys``): the terminal signalled on the byte wherever it came from, and a
    paste that held a Ctrl-C ended the chat, leaving the rest of the paste to the shell.
    """
    import termios

    keyed = list(saved)
    keyed[0] = saved[0] & ~termios.ICRNL
    keyed[3] = saved[3] & ~(termios.ICANON | termios.ECHO | termios.ISIG)
    keyed[6] = list(saved[6])
    keyed[6][termios.VMIN] = 1
    keyed[6][termios.VTIME] = 0
    return keyed


@dataclass(frozen=True)
class KeyedMode:
    """Terminal ``fd`` read key by key (``keyed``), and what puts it back as it was."""

    fd: int
    saved: list[Any]
    """The mode it had (as ``termios.tcgetattr`` gives it)."""
    keyed: list[Any]
    ending_signals: list[signal.Signals]
    """The signals whose handler puts ``saved`` back first (``restore_before_ending``)."""

    @classmethod
    def enter(cls, fd: int) -> KeyedMode:
        """Read terminal ``fd`` key by key; ``OSError`` when it went away."""
        import termios

        try:
            saved = termios.tcgetattr(fd)
        except termios.error as error:  # the terminal went away: the chat ends with one line
            raise OSError(*error.args) from error
        mode = cls(fd, saved, keyed_mode(saved), restore_before_ending(fd, saved))
        try:
            termios.tcsetattr(fd, termios.TCSANOW, mode.keyed)
        except termios.error as error:
            mode.restore()
            raise OSError(*error.args) from error
        return mode

    def restore(self) -> None:
        """Put the mode back, with pasted text no longer marked, and the ending signals'
        handlers: they may end the chat as before."""
        import termios

        with contextlib.suppress(termios.error):  # a terminal that went away has no mode
            termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)
        # Unbuffered: a terminal that went away fails it, and a buffered copy would fail
        # again as the chat ends, with a traceback.
        with contextlib.suppress(OSError, ValueError):
            os.write(sys.stdout.fileno(), BRACKETED_PASTE_OFF.encode())
        for number in self.ending_signals:
            signal.signal(number, signal.SIG_DFL)


_SIGNALS = {
    SignalKey.INTERRUPT: "SIGINT",
    SignalKey.QUIT: "SIGQUIT",
    SignalKey.SUSPEND: "SIGTSTP",
}


def signal_job(key: SignalKey) -> None:
    """Send the signal of ``key`` to the chat's process group, as the terminal sends it to
    its foreground job."""
    number = getattr(signal, _SIGNALS[key], None)  # by name: a platform may lack it
    if number is not None:
        os.killpg(os.getpgrp(), number)


def typed_signal_key(typed: str, keys: EditingKeys) -> SignalKey | None:
    """The first key in ``typed`` that signals the chat's job (``signal_job``), if any: what
    the terminal in its line mode signalled as it was typed."""
    editor, rest = LineEditor(keys), typed
    while rest:
        ending, rest = editor.feed(rest)
        if isinstance(ending, SignalKey):
            return ending
        if ending is None:
            return None
    return None
