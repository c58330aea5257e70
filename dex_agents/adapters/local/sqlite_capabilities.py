"""What ``SqliteFlowStore`` offers beyond transactions: the ``store_capabilities`` ports,
and the polls that tell it about commits it did not make.

- ``CommittedEvents``: the events its own commits appended (``own_events``);
- ``WorkerMarks``: ``flock``ed files under ``<path>-workers`` (``worker_marks``);
- ``WatchableWrites``: an inotify watch of the ``-wal`` file (``wal_writes``) and
  ``PRAGMA data_version`` on the store's own connection (``written_elsewhere``);
- ``change_counter`` and ``FlowChangeLog``: reads on the polling connection, which
  waits behind no transaction.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta
from pathlib import Path

from dex_agents.adapters.local.flow_changes import runs_logged_after
from dex_agents.adapters.local.own_events import OwnEvents
from dex_agents.adapters.local.sqlite_connection import translate_error
from dex_agents.adapters.local.wal_writes import WalWrites
from dex_agents.adapters.local.worker_marks import HeldMark, WorkerMarkFiles
from dex_agents.ports.flow_rows import EventRow
from dex_agents.ports.store_capabilities import LoggedRuns


class SqliteStoreCapabilities:
    """Mixed into ``SqliteFlowStore``, which provides its file (``path``, ``busy_timeout``),
    its connection and the lock that guards it (``_connection``, ``_lock``), the polling
    connection and its lock (``_poll``, ``_poll_lock``), and ``_elsewhere_seen``,
    ``_own_events`` and ``_marks``."""

    path: Path
    busy_timeout: timedelta
    _lock: threading.RLock
    _poll_lock: threading.Lock
    _connection: sqlite3.Connection | None
    _poll: sqlite3.Connection | None
    _elsewhere_seen: int | None
    _own_events: OwnEvents
    _marks: WorkerMarkFiles

    def event_after(self, flow_id: str, after_id: int) -> EventRow | None:
        """The event of ``flow_id`` that this store committed right after event ``after_id``,
        holding the write lock, so that nothing came between; ``None`` when it does not know.

        The newest ``own_events.COMMITTED_EVENTS_KEPT`` events are known, so a reader in
        this process follows a session's Stream without a read per event.
        """
        return self._own_events.event_after(flow_id, after_id)

    def newest_committed_event(self, flow_id: str) -> tuple[EventRow, int] | None:
        """The last event this store's commits appended to ``flow_id``'s Stream and the change
        number (``runs_logged_since``) of that commit; ``None`` when it does not know."""
        return self._own_events.newest(flow_id)

    def hold_worker_mark(self, owner: str) -> HeldMark | None:
        """``WorkerMarks``: a file of the owner's own under ``<path>-workers``, ``flock``ed."""
        return self._marks.hold_worker_mark(owner)

    def worker_gone(self, owner: str) -> bool:
        """``WorkerMarks``: the owner's mark file exists and no process holds it."""
        return self._marks.worker_gone(owner)

    def gone_owners(self) -> frozenset[str]:
        """``WorkerMarks``: the owners of the mark files under ``<path>-workers`` that no
        process holds."""
        return self._marks.gone_owners()

    def forget_worker_mark(self, owner: str) -> None:
        """``WorkerMarks``: remove the owner's mark file if no process holds it."""
        self._marks.forget_worker_mark(owner)

    def watch_writes(self) -> WalWrites | None:
        """A watch of the commits any process signals on this file's ``-wal`` file
        (``WalSync.signal``, ``wal_writes.py``); ``None`` where inotify is missing or refused."""
        return WalWrites.open(self.path)

    def written_elsewhere(self) -> bool:
        """Whether another connection committed since this was last asked: ``PRAGMA
        data_version`` on this store's own connection, which its own commits do not move.
        ``True`` at the first ask and while another thread holds the connection (it cannot
        tell without waiting); an answer that cannot tell leaves the next one unchanged."""
        if not self._lock.acquire(blocking=False):
            return True
        try:
            connection = self._connection
            if connection is None:
                return True
            try:
                version = int(connection.execute("PRAGMA data_version").fetchall()[0][0])
            except sqlite3.Error:
                return True
            seen, self._elsewhere_seen = self._elsewhere_seen, version
            return version != seen
        finally:
            self._lock.release()

    def change_counter(self) -> int:
        """SQLite's ``PRAGMA data_version`` on a polling connection: it changes on every commit."""
        with self._poll_lock:
            if self._poll is None:
                raise RuntimeError(f"the flow store {self.path} is closed")
            try:
                # fetchall finishes the statement, so no read snapshot stays open to hold back
                # WAL checkpoints.
                return int(self._poll.execute("PRAGMA data_version").fetchall()[0][0])
            except sqlite3.Error as error:
                raise translate_error(error, self.path, self.busy_timeout) from error

    def runs_logged_since(self, change: int | None) -> LoggedRuns:
        """The Flow runs that got Stream events after change number ``change``
        (``flow_changes``), every run changed after it, and the newest number, read on the
        polling connection: it waits behind no transaction."""
        with self._poll_lock:
            if self._poll is None:
                raise RuntimeError(f"the flow store {self.path} is closed")
            try:
                return runs_logged_after(self._poll.execute, change)
            except sqlite3.Error as error:
                raise translate_error(error, self.path, self.busy_timeout) from error
