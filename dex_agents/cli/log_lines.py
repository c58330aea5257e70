"""Log records as one line each on stderr, for the ``dex-agents`` command.

The library logs a warning with its traceback when it carries on past a fault,
such as an MCP server that could not be listed. A program that set up no
logging printed those tracebacks into the chat; the command prints each record
as one escaped line instead: ``dex-agents: warning: <message>: <error>``.

While ``dex-agents chat`` reads keys at a terminal, a prompt may wait below a
running turn's text: a record written to the terminal's stderr then landed in the
middle of the prompt's row, and the prompt's next redraw erased the wrong rows. The
chat shows those records as its own lines instead (``records_shown_by``).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TextIO

from dex_agents.cli import terminal


class OneLineFormatter(logging.Formatter):
    """A record as ``<prog>: <level>: <message>``, then its exception's first line, no traceback."""

    def __init__(self, prog: str) -> None:
        super().__init__()
        self._prog = prog

    def format(self, record: logging.LogRecord) -> str:
        """The record's one line, escaped for a terminal."""
        text = record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            lines = str(error).strip().splitlines()
            text = f"{text}: {lines[0] if lines else type(error).__name__}"
        return f"{self._prog}: {record.levelname.lower()}: {terminal.escaped(text)}"


class OneLineHandler(logging.StreamHandler[TextIO]):
    """Writes each record's one line to stderr, or hands it to ``show`` while one is set
    (``records_shown_by``)."""

    def __init__(self, prog: str) -> None:
        super().__init__(sys.stderr)
        self.setLevel(logging.WARNING)
        self.setFormatter(OneLineFormatter(prog))
        self.show: Callable[[str], None] | None = None
        self.show_thread: int | None = None  # the thread ``show`` may be called on

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record``'s line, through ``show`` when it is set and this is its thread."""
        show = self.show
        if show is None or threading.get_ident() != self.show_thread:
            super().emit(record)
            return
        try:
            show(self.format(record))
        except Exception:  # as StreamHandler.emit: logging never fails the code that logs
            self.handleError(record)


def log_in_one_line(prog: str) -> None:
    """Send warnings and errors to stderr one line each, unless logging is set up already."""
    root = logging.getLogger()
    if root.handlers:  # the embedding program (or pytest) chose where records go
        return
    root.addHandler(OneLineHandler(prog))


@contextlib.contextmanager
def records_shown_by(show: Callable[[str], None]) -> Iterator[None]:
    """Have ``log_in_one_line``'s records logged on this thread shown by ``show`` (a line
    without its line break) while the block runs, when stderr is a terminal: redirected,
    it keeps them apart from what ``show`` writes. Records of other threads, which may not
    write where ``show`` does, still go to stderr as they were."""
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, OneLineHandler)]
    if not _is_terminal(sys.stderr):
        handlers = []
    for handler in handlers:
        handler.show, handler.show_thread = show, threading.get_ident()
    try:
        yield
    finally:
        for handler in handlers:
            handler.show, handler.show_thread = None, None


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):  # closed
        return False
