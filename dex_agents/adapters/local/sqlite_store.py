"""The SQLite ``FlowStore``: the embedded engine's durable state in one file that several processes share.

The file is the server. It runs in WAL mode, so readers see a snapshot and never
block the writer; a durable commit returns once the WAL is synced, which it is
after the write lock is let go (``wal_sync.py``), and a process killed at any
moment leaves a consistent database. Every
transaction begins with ``BEGIN IMMEDIATE``: it takes the write lock up front,
which serializes transactions across processes and rules out lock-upgrade
deadlocks. Times are stored as fixed-width ISO 8601 UTC text with microseconds,
so text order is time order.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from dex_agents.adapters.local.damaged_pages import DamagedRuns
from dex_agents.adapters.local.event_blocks import BlockSizes
from dex_agents.adapters.local.flow_changes import runs_changed_after
from dex_agents.adapters.local.kept_reads import read_kept
from dex_agents.adapters.local.known_rows import KnownRows
from dex_agents.adapters.local.own_events import OwnEvents
from dex_agents.adapters.local.sqlite_batch_works import (
    WorkRaised,
    each_in_savepoint,
    raising_apart,
)
from dex_agents.adapters.local.sqlite_capabilities import SqliteStoreCapabilities
from dex_agents.adapters.local.sqlite_connection import (
    configure,
    connect,
    transact,
    translate_error,
)
from dex_agents.adapters.local.sqlite_transaction import SqliteTransaction
from dex_agents.adapters.local.sqlite_versions import SCHEMA_VERSION, UPGRADED_VERSIONS
from dex_agents.adapters.local.store_errors import (
    StoreBusyError,
    StoreCorruptError,
    StoredValueError,
    StoreError,
    StoreFileGoneError,
    StoreVersionError,
)
from dex_agents.adapters.local.wal_sync import WalSync
from dex_agents.adapters.local.worker_marks import WorkerMarkFiles, marks_directory
from dex_agents.adapters.local.write_once_values import WriteOnceValues
from dex_agents.adapters.local.writer_turnstile import WriterTurnstile
from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction, StoreWouldWaitError

R = TypeVar("R")

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "SCHEMA_VERSION",
    "UPGRADED_VERSIONS",
    "SqliteFlowStore",
    "StoreBusyError",
    "StoreCorruptError",
    "StoreError",
    "StoreFileGoneError",
    "StoreVersionError",
    "StoredValueError",
]

DEFAULT_BUSY_TIMEOUT = timedelta(seconds=10)
"""How long a transaction waits for another connection's write lock before ``StoreBusyError``."""


class SqliteFlowStore(SqliteStoreCapabilities):
    """A ``FlowStore`` in an SQLite file: durable, and shared by every process that opens the file.

    The schema is created when the file is new. ``busy_timeout`` bounds how long a
    transaction waits for another connection's write lock (``StoreBusyError``).
    Writers of the file take that lock in turn (``WriterTurnstile``, through a
    ``<name>-writers`` file beside it), and long values and Stream events are
    stored compressed (``stored_text``). ``client=True`` is for a process that
    runs no worker: its writes (a person's RPCs) go ahead of those of worker
    processes waiting for the lock (through a ``<name>-clients`` file).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: timedelta = DEFAULT_BUSY_TIMEOUT,
        client: bool = False,
    ) -> None:
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise ValueError(
                f"SqliteFlowStore needs a file path, not {str(path)!r}; use MemoryFlowStore in memory"
            )
        if busy_timeout < timedelta(0):
            raise ValueError(f"busy_timeout cannot be negative: {busy_timeout}")
        # Absolute, its links resolved: SQLite keeps the -wal file beside the real file, and
        # the files derived from the path (the WAL this store syncs, the turnstile, the
        # workers' marks, the write watch) must be those every process of the file uses,
        # whatever name it was given; and a relative name stays right after a chdir.
        self.path = Path(os.path.realpath(path))
        self.busy_timeout = busy_timeout
        self.client = client
        """Whether this store's writes go ahead of worker processes' (``client=True``)."""
        self._lock = threading.RLock()
        self._poll_lock = threading.Lock()
        self._in_run = False
        self._connection: sqlite3.Connection | None = None
        # A second connection only reads PRAGMA data_version, which changes on every commit
        # by any other connection, this store's own included, and waits behind no transaction.
        self._poll: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._write_once = WriteOnceValues()
        self._damaged_runs = DamagedRuns(self.path)
        self._block_sizes = BlockSizes()
        self._known = KnownRows()
        # PRAGMA data_version on this store's connection when written_elsewhere last read it.
        self._elsewhere_seen: int | None = None
        self._own_events = OwnEvents()
        self._turnstile: WriterTurnstile | None = None
        self._wal = WalSync(self.path)
        self._marks = WorkerMarkFiles(marks_directory(self.path))
        # The connection's busy timeout as last set: a read waits up to the store's, and a
        # write's BEGIN is retried by the turnstile with none. Once begun, a write
        # transaction holds every lock it needs (WAL's automatic checkpoint never waits),
        # so writes in a row set it once, not twice each.
        self._busy_ms: int | None = None
        try:
            self._connection = connect(self.path, self.busy_timeout)
            configure(self._connection, self.path, busy_timeout, self._wal)
            self._poll = connect(self.path, self.busy_timeout)
            self._identity = self._file_identity()
            self._turnstile = WriterTurnstile(self.path, client=client)
        except sqlite3.Error as error:
            self.close()
            raise translate_error(error, self.path, self.busy_timeout) from error
        except BaseException:
            self.close()
            raise

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return None
        return status.st_dev, status.st_ino

    def _check_file(self) -> None:
        """Refuse to go on when the file at ``path`` is no longer the one this store opened."""
        if self._file_identity() != self._identity:
            raise StoreFileGoneError(
                f"the session database {self.path} was deleted or replaced while this "
                "process had it open; nothing more is written to it: restart the process"
            )

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction and commit it; roll back if it raises.

        It returns once the WAL is synced, after ``COMMIT`` let the write lock go
        (``wal_sync.py``). ``durable=False`` commits without that fsync: a process
        crash keeps the commit (it is in the WAL file); a power failure may lose it
        together with every later commit that was not synced, never alone, because
        the WAL is replayed in order up to its last valid frame.
        """
        return self._run_work(work, read_only=False, durable=durable)

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        """Run ``works`` in one ``BEGIN IMMEDIATE`` transaction, each in a savepoint of its own.

        A work that raises an ``Exception`` is rolled back to its savepoint (a lone
        work's transaction is rolled back instead: no savepoint); a failure of
        SQLite itself rolls the whole transaction back and raises.
        """
        return self._run_batch_work(works, durable, None)

    def read(self, work: Callable[[StoreTransaction], R]) -> R:
        """Run read-only ``work`` on a WAL snapshot: it takes no write lock, so writers never wait for it."""
        return self._run_work(work, read_only=True)

    def try_run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        """``run_batch`` if this store's connection is free and no connection holds the
        write lock or the turnstile right now; otherwise ``StoreWouldWaitError``."""
        self._hold_now()
        try:
            return self._run_batch_work(works, durable, self._begin_write_now)
        finally:
            self._lock.release()

    def _run_batch_work(
        self,
        works: Sequence[Callable[[StoreTransaction], Any]],
        durable: bool,
        begin: Callable[[sqlite3.Connection], None] | None,
    ) -> Sequence[BatchOutcome]:
        if len(works) != 1:
            return self._run_work(
                each_in_savepoint(works, self.path), read_only=False, durable=durable, begin=begin
            )
        # A lone work needs no savepoint: its failure is the whole transaction's, and rolling
        # the transaction back undoes what rolling back to a savepoint would, in two
        # statements fewer per commit (most commits carry one work).
        try:
            value = self._run_work(
                raising_apart(works[0], self.path), read_only=False, durable=durable, begin=begin
            )
        except WorkRaised as raised:
            return [BatchOutcome(error=raised.error)]
        return [BatchOutcome(value=value)]

    def try_read(self, work: Callable[[StoreTransaction], R]) -> R:
        """``read`` if this store's connection is free; otherwise ``StoreWouldWaitError``.

        A WAL read never waits for another connection, only for this store's own
        connection, which another thread may be using.
        """
        self._hold_now()
        try:
            return self._run_work(work, read_only=True)
        finally:
            self._lock.release()

    def _hold_now(self) -> None:
        """Take the store's lock now, or raise ``StoreWouldWaitError``; the caller releases it.

        A method and ``try``/``finally`` at its callers, not a ``contextmanager``: its
        generator cost 10 K instructions a call, about 7 to 10 a turn.
        """
        if not self._lock.acquire(blocking=False):
            raise StoreWouldWaitError(f"another thread is in a transaction of {self.path}")

    def _run_work(
        self,
        work: Callable[[StoreTransaction], R],
        *,
        read_only: bool,
        durable: bool = True,
        begin: Callable[[sqlite3.Connection], None] | None = None,
    ) -> R:
        with self._lock:
            if self._connection is None:
                raise RuntimeError(f"the flow store {self.path} is closed")
            if self._in_run:
                raise RuntimeError("FlowStore.run cannot run inside another transaction's work")
            connection = self._connection
            self._check_file()
            self._wal.check()
            known = self._known

            def transaction(
                begin: Callable[[], None] | None = None, look: Callable[[], None] | None = None
            ) -> SqliteTransaction:
                return SqliteTransaction(
                    connection,
                    self._write_once,
                    read_only=read_only,
                    known=known,
                    block_sizes=self._block_sizes,
                    begin=begin,
                    look=look,
                    damaged_runs=self._damaged_runs,
                )

            worked = False

            def known_work(tx: SqliteTransaction, _: sqlite3.Connection) -> R:
                nonlocal worked
                # data_version moves only when another connection committed: then what
                # it changed of what this connection kept is forgotten.
                known.begin(
                    connection.execute("PRAGMA data_version").fetchone()[0],
                    functools.partial(runs_changed_after, connection.execute),
                )
                worked = True
                result = work(tx)
                tx.log_changes()
                return result

            self._in_run = True
            tx: SqliteTransaction | None = None
            try:
                if read_only:
                    done, value = read_kept(
                        connection,
                        known,
                        work,
                        transaction,
                        lambda: self._set_busy_timeout(connection, self._patience_ms()),
                    )
                    if done:
                        return cast(R, value)
                    tx = transaction()
                    self._set_busy_timeout(connection, self._patience_ms())
                    return transact(connection, functools.partial(known_work, tx), "BEGIN DEFERRED")
                tx = transaction()
                changes = connection.total_changes
                result = transact(
                    connection, functools.partial(known_work, tx), begin or self._begin_write
                )
                # A commit that changed no row wrote no WAL frame: there is nothing to sync,
                # and nothing for another process to see.
                if connection.total_changes != changes:
                    self._wal.signal()
                    if durable:
                        self._wal.sync()
                known.committed(tx.change)
                self._write_once.committed(tx.written_once)
                self._own_events.committed(tx.appended, tx.change)
                return result
            except BaseException as error:
                # A write transaction's rollback undid writes that were kept as they were
                # made, and Stream blocks it sealed, whose event IDs come again; a read that
                # raised (a session not found, a refused write) wrote none, and neither did a
                # write that never began (another connection was writing: forgetting then
                # made a worker beside a client read every session again).
                if worked and not read_only:
                    known.forget()
                    self._block_sizes.forget()
                    if tx is not None and tx.change is not None:
                        # It logged a number, and may have raised after its COMMIT landed,
                        # before ``committed``: the next commit reads the newest again.
                        known.change = None
                if isinstance(error, sqlite3.Error):
                    raise translate_error(error, self.path, self.busy_timeout) from error
                if isinstance(error, StoredValueError):
                    raise StoreCorruptError(f"{self.path} is damaged: {error}") from error
                raise
            finally:
                if tx is not None:
                    tx.end()
                self._in_run = False

    def _patience_ms(self) -> int:
        return round(self.busy_timeout.total_seconds() * 1000)

    def _set_busy_timeout(self, connection: sqlite3.Connection, milliseconds: int) -> None:
        if self._busy_ms != milliseconds:
            connection.execute(f"PRAGMA busy_timeout = {milliseconds}")
            self._busy_ms = milliseconds

    def _begin_write(self, connection: sqlite3.Connection) -> None:
        assert self._turnstile is not None  # set once the file opened, before any work runs
        self._set_busy_timeout(connection, 0)
        self._turnstile.begin(connection, self.busy_timeout.total_seconds())

    def _begin_write_now(self, connection: sqlite3.Connection) -> None:
        assert self._turnstile is not None
        self._set_busy_timeout(connection, 0)
        if not self._turnstile.try_begin(connection):
            raise StoreWouldWaitError(f"another connection is writing to {self.path}")

    def close(self) -> None:
        """Close the store's connections; the file and its data stay."""
        with self._lock, self._poll_lock:
            if self._in_run:
                raise RuntimeError("a flow store cannot be closed inside a transaction's work")
            for connection in (self._poll, self._connection):
                if connection is not None:
                    connection.close()
            self._poll = self._connection = None
            self._wal.close()
            if self._turnstile is not None:
                self._turnstile.close()
                self._turnstile = None
