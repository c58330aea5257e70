"""Writers of one session database take the write lock in turn, so none waits behind a stream of commits.

SQLite's write lock is not a queue. A connection that finds it held sleeps
(1 ms, then 2, 5, 10 ... up to 100 ms between tries), and a worker that commits
the Steps of many sessions takes the lock again the moment it lets it go. A
client's RPC in another process then lost the race commit after commit: under
a busy worker a ``send_user_message`` waited a quarter of a second at the
99th percentile, half a second at worst, behind commits of a few milliseconds.

The turnstile is an ``flock`` on a file beside the database (``<name>-writers``).
A writer holds it from before ``BEGIN IMMEDIATE`` until that returns, and not
while its transaction runs. So a writer that is waiting for the write lock
holds the turnstile, and the connection that holds the write lock cannot begin
its next transaction until the waiter has begun its own: every writer waits for
at most the transaction in flight when it came. The turnstile only orders
writers; SQLite's lock still makes them exclusive, so a process that does not
use it (an older dex-agents, the ``sqlite3`` shell) is safe, merely unordered.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

_FIRST_PAUSE = 0.0001
"""Seconds between the first tries of a taken turnstile or write lock; doubled up to ``_LONGEST_PAUSE``."""

_LONGEST_PAUSE = 0.001
"""Either is held for one transaction at most: look again soon."""


class WriterTurnstile:
    """The ``flock`` every write transaction of one database file passes before it begins."""

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + "-writers")
        self._fd: int | None
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            # Without the file writers are merely unordered, as SQLite alone leaves them.
            self._fd = None

    def begin(self, connection: sqlite3.Connection, patience: float) -> None:
        """``BEGIN IMMEDIATE`` on ``connection`` in turn, trying for up to ``patience`` seconds.

        The write lock is tried every millisecond or sooner, not on SQLite's own
        schedule, whose pauses grow to 100 ms: a writer whose turn has come
        begins within a millisecond of the transaction before it. Raises
        SQLite's busy error when the turnstile or the lock stays taken past
        ``patience``: a writer that went ahead of the one holding the turnstile
        would take the lock in the instants it is free between that writer's
        tries, commit after commit, and leave it waiting out its own patience.
        """
        deadline = time.monotonic() + patience
        fd = self._fd
        if fd is not None and not _retried(lambda: _try_flock(fd), deadline):
            raise _busy("another writer is waiting for the write lock")
        try:
            # The busy timeout is the connection's own patience for every other statement;
            # only this BEGIN is retried here, so it is off while that runs.
            connection.execute("PRAGMA busy_timeout = 0")
            try:
                if not _retried(lambda: _try_begin(connection), deadline):
                    connection.execute("BEGIN IMMEDIATE")  # raises the busy error
            finally:
                connection.execute(f"PRAGMA busy_timeout = {round(patience * 1000)}")
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def try_begin(self, connection: sqlite3.Connection, busy_timeout: float) -> bool:
        """``BEGIN IMMEDIATE`` on ``connection`` if nobody holds the turnstile or the write
        lock right now; ``False``, with nothing begun, if somebody does.

        ``busy_timeout`` (seconds) is the connection's patience to restore afterwards.
        """
        fd = self._fd
        if fd is not None and not _try_flock(fd):
            return False
        try:
            connection.execute("PRAGMA busy_timeout = 0")
            try:
                return _try_begin(connection)
            finally:
                connection.execute(f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}")
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file; the lock it held goes with it. The file itself stays for other processes."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _busy(reason: str) -> sqlite3.OperationalError:
    # The error SQLite raises for a taken write lock, so the store reports both alike.
    error = sqlite3.OperationalError(f"database is locked: {reason}")
    error.sqlite_errorcode = sqlite3.SQLITE_BUSY
    error.sqlite_errorname = "SQLITE_BUSY"
    return error


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _try_begin(connection: sqlite3.Connection) -> bool:
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if (getattr(error, "sqlite_errorcode", 0) & 0xFF) != sqlite3.SQLITE_BUSY:
            raise
        return False
    return True


def _retried(attempt: Callable[[], bool], deadline: float) -> bool:
    # Tried without blocking, so no writer waits past its busy timeout, and with
    # short pauses, because a turnstile or write lock is held for one transaction.
    pause = _FIRST_PAUSE
    while not attempt():
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)
    return True
