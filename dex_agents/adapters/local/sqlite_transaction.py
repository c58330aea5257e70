"""One SQLite store transaction: the ``StoreTransaction`` primitives as SQL.

Its Step executions, Attribute values and Channels are mixins of their own
(``sqlite_executions``, ``sqlite_flow_state``, ``sqlite_channels``), its Stream a
``SqliteStream``; this holds what they share, its statements and its savepoints.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from dex_agents.adapters.local.damaged_pages import DamagedRuns
from dex_agents.adapters.local.event_blocks import BlockSizes
from dex_agents.adapters.local.flow_changes import record_changes
from dex_agents.adapters.local.known_rows import KnownRows, known_on_first_use
from dex_agents.adapters.local.sqlite_channels import SqliteChannels
from dex_agents.adapters.local.sqlite_connection import still_in_transaction
from dex_agents.adapters.local.sqlite_executions import SqliteExecutions
from dex_agents.adapters.local.sqlite_flow_state import SqliteFlowState
from dex_agents.adapters.local.sqlite_stream import SqliteStream
from dex_agents.adapters.local.write_once_values import WriteOnceValues
from dex_agents.ports.flow_rows import EventRow
from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction

_READS = ("SELECT", "WITH")
"""How every statement a read-only transaction may run begins."""

_EXECUTIONS = "step_executions"
"""What the SQL of every statement that reads or writes Step execution rows names."""


class SqliteTransaction(SqliteFlowState, SqliteChannels, SqliteExecutions, StoreTransaction):
    def __init__(
        self,
        connection: sqlite3.Connection,
        write_once: WriteOnceValues | None = None,
        *,
        read_only: bool = False,
        known: KnownRows | None = None,
        block_sizes: BlockSizes | None = None,
        begin: Callable[[], None] | None = None,
        look: Callable[[], None] | None = None,
        damaged_runs: DamagedRuns | None = None,
    ) -> None:
        self._connection: sqlite3.Connection | None = connection
        # The one cursor of the statements whose results are read at once (``_execute``):
        # Connection.execute made a cursor per statement, about 1.3 K instructions of 15 K.
        self._cursor: sqlite3.Cursor | None = None
        self._damaged_runs = damaged_runs if damaged_runs is not None else DamagedRuns()
        # Called before the first statement (a read served from the kept rows alone begins no
        # transaction), and at the first use of the kept rows unless a statement came first
        # (it checks them then): ``kept_reads``.
        self._begin, self._look = begin, look
        self._write_once = write_once if write_once is not None else WriteOnceValues(0)
        # What the connection knows across transactions (alone, a transaction knows itself).
        self._known_rows = known if known is not None else KnownRows()
        # Until looked at, a stand-in that looks at the first use (``_known_now``).
        self._known = self._known_rows if look is None else known_on_first_use(self._known_now)
        # Checked here rather than with PRAGMA query_only: toggling that pragma expires every
        # prepared statement of the connection, so each read would compile its SQL again.
        self._read_only = read_only
        # What this transaction wrote is not committed until it ends, so it is never kept:
        # a rolled-back write kept would be served as if it were stored.
        self._written: set[tuple[str, str, str]] = set()
        # The text of each value this transaction wrote (None: deleted) and no savepoint
        # undid: a read of it in the transaction is served from here.
        self._texts_written: dict[tuple[str, str, str], str | None] = {}
        self.written_once: list[tuple[str, str, str, str | None]] = []
        """Writes to maps the store keeps the values of (``WriteOnceValues``), in order: kept
        once the transaction commits, so the Step that reads a message next reads no row."""
        # Step execution rows as this transaction last read or wrote them (their stored
        # values), so an update writes only the columns it changes: a full-row UPDATE
        # also rewrites the entry of every index of step_executions.
        self._executions_seen: dict[int, tuple[tuple[object, ...], Sequence[object]]] = {}
        # Step executions this transaction inserted and has not written yet, by ID: their
        # stored values now. Most are claimed (or finished, or put to wait) in the commit
        # that creates them, so their INSERT waits for the commit, or for the first
        # statement that reads step_executions, and carries what the updates changed.
        self._unwritten: dict[int, list[object]] = {}
        # Stored executions this transaction changed and has not written yet, by ID: their
        # stored values now and the ``EXECUTION_DATA`` positions changed since they were
        # written. A Step run in a commit goes from waiting to ready, running and finished
        # in it: one UPDATE, at the commit or before the next statement that names
        # step_executions, carries all three.
        self._unupdated: dict[int, tuple[list[object], frozenset[int]]] = {}
        self._depth = 0  # savepoints open
        self._forget_channel_reads()  # none read yet (``SqliteChannels``)
        # The Flow runs whose kept rows (``KnownRows``) this transaction wrote: logged in its
        # commit, so other connections forget those alone. A write a savepoint undid stays
        # here; that only makes them forget a run more.
        self._changed: set[str] = set()
        self._with_events: set[str] = set()  # those it appended Stream events of
        self._with_state: set[str] = set()  # those whose row or Attribute values it wrote
        self.change: int | None = None
        """The change number this transaction logged, if it changed any Flow run."""
        self.appended: list[tuple[int, EventRow]] = []
        """The Stream events this transaction appended, each with the ID of the event of its
        Flow run before it, where that was known."""
        self._stream = SqliteStream(
            self._execute,
            functools.partial(self._execute, apart=True),
            self._known,
            self.appended,
            block_sizes or BlockSizes(0),
            self._changed,
            self._with_events,
        )

    def _known_now(self) -> KnownRows:
        """The kept rows, looked at first if neither a look nor a statement came yet."""
        look, self._look = self._look, None
        if look is not None:
            look()
        self._known = self._stream.known = self._known_rows
        return self._known_rows

    def end(self) -> None:
        self._connection = None
        if self._cursor is not None:
            # A read an error stopped mid-way ends here: the error's traceback may keep this
            # transaction alive, and an open statement keeps its read snapshot.
            self._cursor.close()
            self._cursor = None
        self._stream.end()

    def log_changes(self) -> None:
        """Log the Flow runs this transaction changed (``flow_changes``), just before it
        commits, under the number it then holds in ``change``."""
        self._write_pending()
        self._stream.save_sizes()
        if self._changed:
            # The connection's kept newest number is the file's: the write lock is held, and
            # KnownRows.begin read the log again at this transaction's start if another
            # connection had committed since (None, unknown: read here).
            self.change = record_changes(
                self._execute,
                self._changed,
                self._with_events,
                self._with_state,
                self._known_rows.change,
            )

    def _execute(
        self, sql: str, params: Sequence[object] | dict[str, object] = (), *, apart: bool = False
    ) -> sqlite3.Cursor:
        """Run ``sql`` in the transaction on its one cursor, which the next statement resets:
        read its result (rows, ``rowcount``, ``lastrowid``) before running another.

        ``apart`` runs it on a cursor of its own, for a read whose rows are read while
        other statements run, or that its caller closes or leaves before its last row.
        A caller that may stop before the last row closes it in a ``finally``: an error's
        traceback keeps the cursor, and its statement the read snapshot, past ``end``.
        """
        connection = self._connection
        if connection is None:
            raise RuntimeError(
                "this store transaction has ended; use it only inside the work FlowStore.run runs"
            )
        if self._read_only and not sql.startswith(_READS):
            raise RuntimeError("FlowStore.read work must not write")
        if self._begin is not None:
            begin, self._begin = self._begin, None
            begin()
            # Begun, the transaction checked the kept rows itself, if nothing looked before.
            self._look = None
            self._known = self._stream.known = self._known_rows
        if (self._unwritten or self._unupdated) and _EXECUTIONS in sql:
            self._write_pending()
        if not connection.in_transaction:
            # Checked here, and the function called only to raise: a call per statement (about
            # a hundred a turn) was 0.4 K instructions of its 1.9 K of Python.
            still_in_transaction(connection)
        if apart:
            return connection.execute(sql, params)
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = connection.cursor()
        return cursor.execute(sql, params)

    def run_undoable(self, work: Callable[[], Any]) -> BatchOutcome:
        """Run ``work`` in a savepoint; an ``Exception`` it raises rolls back to it.

        Savepoints nest (a work of a batch may run another), each named for its
        depth. An error of SQLite itself is raised: the transaction is unusable.
        """
        name = f"work_{self._depth}"
        # Executions not yet written stay so, and the Stream's sizes stay unsaved (one upsert
        # a commit, not one a work of a batch): a rollback to it brings back what they were
        # when it began (values are replaced, never changed in place, so a copy of each map
        # holds them).
        unwritten, unupdated = dict(self._unwritten), dict(self._unupdated)
        texts_written = dict(self._texts_written)
        unsaved_sizes = self._stream.unsaved_sizes()
        self._execute(f"SAVEPOINT {name}")
        appended, written_once = len(self.appended), len(self.written_once)
        self._depth += 1
        try:
            value = work()
        except sqlite3.Error:
            raise
        except Exception as error:
            self._execute(f"ROLLBACK TO {name}")
            self._execute(f"RELEASE {name}")
            # They may hold what was just undone.
            self._unwritten, self._unupdated = unwritten, unupdated
            self._texts_written = texts_written
            self._executions_seen.clear()
            self._forget_channel_reads()
            self._known.forget()
            self._stream.restore_unsaved_sizes(unsaved_sizes)
            del self.appended[appended:]
            del self.written_once[written_once:]
            return BatchOutcome(error=error)
        finally:
            self._depth -= 1
        self._execute(f"RELEASE {name}")
        return BatchOutcome(value=value)

    # Stream events
    def append_event(
        self, flow_type: str, flow_id: str, value: str, source: str, created_at: datetime
    ) -> int:
        return self._stream.append(flow_type, flow_id, value, source, created_at)

    def events_after(self, flow_id: str, after_id: int, limit: int) -> Sequence[EventRow]:
        return self._stream.events_after(flow_id, after_id, limit)

    def last_event_id(self, flow_id: str) -> int:
        return self._stream.last_event_id(flow_id)

    def get_event(self, event_id: int) -> EventRow | None:
        return self._stream.get_event(event_id)

    def trim_events(self, flow_type: str, capacity_bytes: int) -> int:
        return self._stream.trim(flow_type, capacity_bytes)
