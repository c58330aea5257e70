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

Clients go first. A process that runs no worker is a client: its writes are
RPCs that a person waits for. While a client's writer waits, it holds a shared
``flock`` on a second file (``<name>-clients``), whether it waits in ``begin``
or tries again and again on its event loop (``try_begin``), and a worker's
writer that sees it held steps back: it does not take the turnstile, and lets
go of it if it was waiting there for the write lock. So a client waits for the
transaction in flight when it came and for clients ahead of it, never for a
queue of worker commits. A worker steps back for at most ``MOST_YIELD`` per transaction, so a
stream of client writes cannot hold the workers up for longer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

_FIRST_PAUSE = 0.0001
"""Seconds between the first tries of a taken turnstile or write lock; doubled up to ``_LONGEST_PAUSE``."""

_LONGEST_PAUSE = 0.001
"""Either is held for one transaction at most: look again soon."""

MOST_YIELD = 0.05
"""Seconds a worker's writer steps back for waiting clients' writers, at most, per transaction."""


class WriterTurnstile:
    """The ``flock`` every write transaction of one database file passes before it begins.

    ``client`` is for a process that runs no worker: its writers go ahead of
    workers' (see the module's docstring).
    """

    def __init__(self, database: Path, *, client: bool = False) -> None:
        self.path = database.with_name(database.name + "-writers")
        self.clients_path = database.with_name(database.name + "-clients")
        self.client = client
        # Without the files writers are merely unordered, as SQLite alone leaves them.
        self._fd = _opened(self.path)
        self._clients_fd = _opened(self.clients_path)
        self._announced = False  # the clients' file kept held after a failed try_begin

    def begin(self, connection: sqlite3.Connection, patience: float) -> None:
        """``BEGIN IMMEDIATE`` on ``connection`` in turn, trying for up to ``patience`` seconds.

        ``connection``'s busy timeout must be zero: the BEGIN is retried here.

        The write lock is tried every millisecond or sooner, not on SQLite's own
        schedule, whose pauses grow to 100 ms: a writer whose turn has come
        begins within a millisecond of the transaction before it. Raises
        SQLite's busy error when the turnstile or the lock stays taken past
        ``patience``: a writer that went ahead of the one holding the turnstile
        would take the lock in the instants it is free between that writer's
        tries, commit after commit, and leave it waiting out its own patience.
        """
        deadline = time.monotonic() + patience
        step_back = self._step_back()
        with self._waiting_as_client(deadline):
            while True:
                retried(lambda: not step_back(), deadline)
                if self._begin_in_turn(connection, deadline, step_back):
                    return

    def _step_back(self) -> Callable[[], bool]:
        """Whether a worker's writer should let waiting clients go first, asked as it waits.

        Never for a client, nor without the clients' file. For a worker, while a
        client waits, for ``MOST_YIELD`` from the first time it steps back, however
        long it waited before.
        """
        clients = self._clients_fd
        if self.client or clients is None:
            return _never
        yield_until: float | None = None

        def step_back() -> bool:
            nonlocal yield_until
            if not _clients_waiting(clients):
                return False
            now = time.monotonic()
            if yield_until is None:
                yield_until = now + MOST_YIELD
            return now < yield_until

        return step_back

    @contextlib.contextmanager
    def _waiting_as_client(self, deadline: float) -> Iterator[None]:
        """For a client, the clients' file held shared while its writer waits."""
        clients = self._clients_fd
        if not self.client or clients is None:
            yield
            return
        # Shared among clients: a worker that cannot take it exclusively sees one waiting.
        if not retried(lambda: _try_flock(clients, fcntl.LOCK_SH), deadline):
            raise _busy("a worker held the clients' file past the busy timeout")
        try:
            yield
        finally:
            fcntl.flock(clients, fcntl.LOCK_UN)  # an announced wait ends with it
            self._announced = False

    def _begin_in_turn(
        self, connection: sqlite3.Connection, deadline: float, step_back: Callable[[], bool]
    ) -> bool:
        """Pass the turnstile and begin; ``False`` with nothing begun when ``step_back``
        said so while waiting for the write lock, so the caller can let a client go first."""
        fd = self._fd
        if fd is not None and not retried(lambda: _try_flock(fd), deadline):
            raise _busy("another writer is waiting for the write lock")
        stepped_back = False

        def attempt() -> bool:
            nonlocal stepped_back
            if _try_begin(connection):
                return True
            stepped_back = step_back()
            return stepped_back

        try:
            if not retried(attempt, deadline):
                connection.execute("BEGIN IMMEDIATE")  # raises the busy error
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
        return not stepped_back

    def try_begin(self, connection: sqlite3.Connection) -> bool:
        """``BEGIN IMMEDIATE`` on ``connection`` if nobody holds the turnstile or the write
        lock right now; ``False``, with nothing begun, if somebody does.

        A client whose try finds them taken is waiting as much as one blocked in
        ``begin``, only on its event loop, trying again: it keeps the clients'
        file held shared, so workers' writers step back for it, until one of its
        tries begins, it waits in ``begin``, or the turnstile closes.

        ``connection``'s busy timeout must be zero, as for ``begin``.
        """
        if not self.client:
            return self._try_begin_as_worker(connection)
        try:
            # Once, without a pause: the deadline has passed before the first try.
            self._begin_in_turn(connection, time.monotonic(), _never)
        except sqlite3.OperationalError as error:
            if not _is_busy(error):
                raise
            self._announce_waiting()
            return False
        self._stop_waiting()
        return True

    def _try_begin_as_worker(self, connection: sqlite3.Connection) -> bool:
        """``try_begin`` for a worker: ``begin``'s rules, each tried once and without
        its closures (a worker's commit begins this way every time): it steps back while
        a client waits, and passes the turnstile before ``BEGIN IMMEDIATE``, letting go
        of it once that returns."""
        clients, fd = self._clients_fd, self._fd
        if clients is not None and _clients_waiting(clients):
            return False
        if fd is not None and not _try_flock(fd):
            return False  # a writer waits for the write lock: it goes first
        try:
            return _try_begin(connection)
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _announce_waiting(self) -> None:
        clients = self._clients_fd
        if self.client and clients is not None and not self._announced:
            # A worker testing for waiting clients holds the file for an instant; the next
            # try announces then.
            self._announced = _try_flock(clients, fcntl.LOCK_SH)

    def _stop_waiting(self) -> None:
        """Let go of the clients' file a client's failed ``try_begin`` kept held."""
        if self._announced:
            self._announced = False
            if self._clients_fd is not None:
                fcntl.flock(self._clients_fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file; the lock it held goes with it. The file itself stays for other processes."""
        for fd in (self._fd, self._clients_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._clients_fd = None
        self._announced = False


def _busy(reason: str) -> sqlite3.OperationalError:
    # The error SQLite raises for a taken write lock, so the store reports both alike.
    error = sqlite3.OperationalError(f"database is locked: {reason}")
    error.sqlite_errorcode = sqlite3.SQLITE_BUSY
    error.sqlite_errorname = "SQLITE_BUSY"
    return error


def _opened(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None


def _try_flock(fd: int, kind: int = fcntl.LOCK_EX) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _clients_waiting(clients: int) -> bool:
    # Each waiting client holds the file shared, so it cannot be taken exclusively.
    if not _try_flock(clients):
        return True
    fcntl.flock(clients, fcntl.LOCK_UN)
    return False


def _never() -> bool:
    return False


def _is_busy(error: sqlite3.OperationalError) -> bool:
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY


def _try_begin(connection: sqlite3.Connection) -> bool:
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if not _is_busy(error):
            raise
        return False
    return True


def retried(attempt: Callable[[], bool], deadline: float) -> bool:
    """Whether ``attempt`` succeeded before ``deadline`` (``time.monotonic()``), tried again after pauses."""
    # Tried without blocking, so no writer waits past its busy timeout, and with
    # short pauses, because a turnstile or write lock is held for one transaction.
    pause = _FIRST_PAUSE
    while not attempt():
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)
    return True
