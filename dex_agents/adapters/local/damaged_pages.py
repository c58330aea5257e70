"""Flow runs whose stored values sit on a damaged page of the file, kept so no transaction reads them.

SQLite reports a page it cannot make sense of (random bytes over an overflow
page, a broken pointer) as ``SQLITE_CORRUPT``, "database disk image is
malformed", and from then on the transaction that read it can write nothing:
each later statement fails the same way, so the whole commit fails. Until
2026-12-07 a claim round that read one session's state there failed each time
it ran, and the worker retried it for ever as a passing store fault, claiming
no other session's Step. Now the store notes that Flow run when a read of its
Attribute values finds a damaged page, and each later transaction of the store
refuses to read those values with ``StoredValueError`` before it reads a page,
so the transaction stays usable: a claim round leases that session's Step with
no state, its attempt fails with ``UnreadableStateError`` naming the run, and
its retry policy and failure route decide, as for a damaged value.

A noted run is not refused for good: each later read of its values first reads
them all on a connection of its own (``DamagedRuns.check``), where a damaged
page spoils nothing, and forgets the note when they read whole. A file a person
repaired in place while the store stayed open (a backup restored over it with
``.restore``, the damaged rows rewritten by another process) is read again:
until 2026-12-07 the note lasted as long as the store was open, so a repaired
session's Step kept failing with ``UnreadableStateError`` until the program
restarted. Only the engine's own reads of a noted run pay for that second
connection, and those come as seldom as its Step's retry policy lets them.

Only damage under the run's own values is noted (``DamagedRuns.note``). A
damaged page of the table's index, or of the table's root page, spoils the read
of every run's values, and until 2026-12-07 each run whose Step ran was noted in
turn and its session failed, for good, though its values were whole and a repair
of the file would have brought all of them back. Before it notes a run, the
store reads the table's first and last rows and the run's values without the
index, on a connection of its own; when the table's root is damaged, or the
run's values read whole, the damage is the file's, not the run's: the read
fails as any other damaged page does (``StoreCorruptError`` naming the file and
what to do), a worker retries it with backoff, and no session fails.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from datetime import timedelta
from pathlib import Path

from dex_agents.adapters.local.store_errors import StoredValueError


def is_damaged_page(error: BaseException) -> bool:
    """Whether ``error`` is SQLite's report of a damaged page (``SQLITE_CORRUPT``)."""
    code = getattr(error, "sqlite_errorcode", None)
    return (
        isinstance(error, sqlite3.DatabaseError)
        and isinstance(code, int)
        and code & 0xFF == sqlite3.SQLITE_CORRUPT
    )


def damaged_page_error(flow_id: str, error: BaseException | None = None) -> StoredValueError:
    """The error that names the Flow run whose values are on a damaged page."""
    cause = "" if error is None else f": {error}"
    return StoredValueError(
        f"the stored values of Flow run {flow_id!r} are on a damaged page of the file{cause}"
    )


PROBE_BUSY_TIMEOUT = timedelta(seconds=1)
"""How long the read that checks a noted run waits for a lock (in WAL mode it seldom waits)."""


class DamagedRuns:
    """The Flow runs of one store whose Attribute values a read found on a damaged page.

    Shared by every transaction of the store, on any thread. With ``path``, the store's
    file, a noted run is read again on a connection of its own before each refusal, and
    forgotten once it reads whole; without one, a note is kept.
    """

    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._runs: dict[str, str] = {}

    def note(self, flow_id: str, error: BaseException) -> bool:
        """Keep ``flow_id`` as damaged, with SQLite's words for it, and return ``True``; or
        return ``False`` and keep nothing when the damage is not under its own values (an
        index's page, the table's root page), which fails every run's read alike."""
        if self._path is not None and not _damage_is_the_runs(self._path, flow_id):
            return False
        with self._lock:
            self._runs.setdefault(flow_id, str(error))
        return True

    def check(self, flow_id: str) -> None:
        """Raise ``StoredValueError`` naming ``flow_id`` when its values are on a damaged page."""
        if not self._runs:  # the common case, without the lock
            return
        with self._lock:
            found = self._runs.get(flow_id)
        if found is None:
            return
        if self._path is not None and _reads_whole(self._path, flow_id):
            # Repaired in place while the store stayed open: its values read again.
            with self._lock:
                self._runs.pop(flow_id, None)
            return
        raise damaged_page_error(flow_id, sqlite3.DatabaseError(found))


def _damage_is_the_runs(path: Path, flow_id: str) -> bool:
    """Whether a damaged page found under ``flow_id``'s values holds its values, as far as a
    read of ``path`` on a connection of its own tells; ``True`` when it cannot tell."""
    try:
        with contextlib.closing(
            sqlite3.connect(path, timeout=PROBE_BUSY_TIMEOUT.total_seconds())
        ) as probe:
            probe.text_factory = bytes
            try:
                # The table's root and the paths to its first and last rows: every run's read
                # passes through the root.
                for order in ("ASC", "DESC"):
                    probe.execute(
                        f"SELECT rowid FROM attribute_values NOT INDEXED ORDER BY rowid {order}"
                        " LIMIT 1"
                    ).fetchall()
            except sqlite3.DatabaseError as error:
                return not is_damaged_page(error)
            try:
                # Through the table alone: an index's damaged page is no run's.
                cursor = probe.execute(
                    "SELECT value FROM attribute_values NOT INDEXED WHERE flow_id = ?", (flow_id,)
                )
                for _ in cursor:
                    pass
            except sqlite3.DatabaseError:
                return True
    except sqlite3.Error:
        return True  # not known: kept as the run's, as before
    return False


def _reads_whole(path: Path, flow_id: str) -> bool:
    """Whether every stored value of ``flow_id`` reads from ``path`` without a damaged page.

    On a connection of its own, so a damaged page leaves the caller's transaction
    usable; the values are read as bytes, every page of them, and not kept.
    """
    try:
        with contextlib.closing(
            sqlite3.connect(path, timeout=PROBE_BUSY_TIMEOUT.total_seconds())
        ) as probe:
            probe.text_factory = bytes
            cursor = probe.execute(
                "SELECT value FROM attribute_values WHERE flow_id = ?", (flow_id,)
            )
            for _ in cursor:
                pass
    except sqlite3.Error:
        # Still damaged, or not known to be whole (a lock held too long): still refused.
        return False
    return True
