"""Log records as one line each on stderr, for the ``dex-agents`` command.

The library logs a warning with its traceback when it carries on past a fault,
such as an MCP server that could not be listed. A program that set up no
logging printed those tracebacks into the chat; the command prints each record
as one escaped line instead: ``dex-agents: warning: <message>: <error>``.
"""

from __future__ import annotations

import logging
import sys

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


def log_in_one_line(prog: str) -> None:
    """Send warnings and errors to stderr one line each, unless logging is set up already."""
    root = logging.getLogger()
    if root.handlers:  # the embedding program (or pytest) chose where records go
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(OneLineFormatter(prog))
    root.addHandler(handler)
