"""Switching a store's file to write-ahead logging, however many processes open a new file at once.

``PRAGMA journal_mode=WAL`` on a file still in rollback mode (a new file is) reads the
file's header and then writes it, in one transaction. A connection whose read finds
another connection already writing gets SQLite's busy error at once: SQLite does not
call the busy handler of a transaction that holds a read lock and wants the write
lock, since two such transactions waiting for each other would never end. So of two
processes that open a new file together, one failed at once, and said it had waited
out its busy timeout. The switch is tried again here until the busy timeout passes.
"""

from __future__ import annotations

import sqlite3
import time

from dex_agents.adapters.local.writer_turnstile import retried


def enter_wal(connection: sqlite3.Connection, patience: float) -> str:
    """The journal mode SQLite keeps for ``connection``'s file after asking for WAL.

    Tried again while another connection holds the file's write lock, for up to
    ``patience`` seconds; then SQLite's busy error is raised, as for any write that
    waited out its busy timeout. A file already in WAL mode answers at once.
    """
    mode: list[str] = []

    def attempt() -> bool:
        try:
            mode.append(str(connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]))
        except sqlite3.OperationalError as error:
            if getattr(error, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            return False
        return True

    if retried(attempt, time.monotonic() + patience):
        return mode[0]
    # Once more, past the deadline: the error raised is SQLite's own busy error.
    return str(connection.execute("PRAGMA journal_mode=WAL").fetchone()[0])
