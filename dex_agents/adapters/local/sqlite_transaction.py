"""One SQLite store transaction: the ``StoreTransaction`` primitives as SQL."""

from __future__ import annotations

import functools
import operator
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from dex_agents.adapters.local.damaged_pages import DamagedRuns
from dex_agents.adapters.local.event_blocks import BlockSizes
from dex_agents.adapters.local.flow_changes import record_changes
from dex_agents.adapters.local.known_rows import ACTIVE_STATUSES, KnownRows, known_on_first_use
from dex_agents.adapters.local.sqlite_channels import SqliteChannels
from dex_agents.adapters.local.sqlite_connection import still_in_transaction
from dex_agents.adapters.local.sqlite_flow_state import SqliteFlowState
from dex_agents.adapters.local.sqlite_rows import (
    EXECUTION_DATA_POSITIONS,
    EXECUTION_INSERT,
    changed_execution_values,
    decode_execution,
    decode_time,
    encode_time,
    execution_fields,
    execution_insert_statement,
    execution_update_statement,
    stored_execution_row,
    stored_execution_values,
)
from dex_agents.adapters.local.sqlite_schema import (
    CLAIMABLE_WHERE,
    DUE_TIMERS_WHERE,
    EXECUTION_DATA,
    EXECUTION_SELECT,
    EXPIRED_LEASES_WHERE,
    LEASED_WHERE,
    NEXT_TIMER_SELECT,
)
from dex_agents.adapters.local.sqlite_stream import SqliteStream
from dex_agents.adapters.local.store_rows import (
    check_limit,
    moved_execution_message,
    utc_time,
)
from dex_agents.adapters.local.write_once_values import WriteOnceValues
from dex_agents.ports.flow_rows import EventRow, ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction

_FLOW_FIELD = EXECUTION_DATA.index("flow_id")  # in ``execution_fields`` and stored values
_FINISHED = "('completed', 'failed', 'cancelled')"

_READS = ("SELECT", "WITH")
"""How every statement a read-only transaction may run begins."""

_EXECUTIONS = "step_executions"
"""What the SQL of every statement that reads or writes Step execution rows names."""

_ACTIVE_SELECT = (
    f"SELECT {EXECUTION_SELECT} FROM step_executions e WHERE e.flow_id = ? "
    f"AND e.status IN ({', '.join(repr(status) for status in sorted(ACTIVE_STATUSES))}) "
    "ORDER BY e.id"
)

_LAST_STEP_ACTIVITY = (
    "SELECT max(created_at), max(finished_at) FROM step_executions WHERE flow_id = ?"
)


_STORED_DATA: Callable[[Sequence[object]], tuple[object, ...]] = operator.itemgetter(
    *EXECUTION_DATA_POSITIONS
)
"""A read row's stored ``EXECUTION_DATA`` values, taken in C: a turn sees about 20 rows."""


class SqliteTransaction(SqliteFlowState, SqliteChannels, StoreTransaction):
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
            self.change = record_changes(
                self._execute, self._changed, self._with_events, self._with_state
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
        if self._connection is None:
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
        connection = still_in_transaction(self._connection)
        if apart:
            return connection.execute(sql, params)
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = connection.cursor()
        return cursor.execute(sql, params)

    def _write_pending(self) -> None:
        """Write the kept INSERTs of new executions, then the kept UPDATEs of stored ones."""
        unwritten, self._unwritten = self._unwritten, {}
        for execution_id, values in unwritten.items():
            self._execute(*execution_insert_statement(execution_id, values))
        unupdated, self._unupdated = self._unupdated, {}
        for execution_id, (values, changed) in unupdated.items():
            self._execute(*execution_update_statement(execution_id, values, sorted(changed)))

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

    def _executions(self, where: str, params: Sequence[object] = ()) -> list[ExecutionRow]:
        sql = f"SELECT {EXECUTION_SELECT} FROM step_executions e {where}"
        read = self._execute(sql, params).fetchall()
        rows = [decode_execution(values) for values in read]
        self._saw(rows, read)
        return rows

    def _saw(self, rows: Sequence[ExecutionRow], stored: Sequence[Sequence[object]]) -> None:
        if not self._read_only:  # only a write transaction updates what it read
            seen = self._executions_seen
            for row, values in zip(rows, stored, strict=True):
                # Each row is as decoded: no caller has changed it yet.
                seen[row.id] = (execution_fields(row), _STORED_DATA(values))

    # Step executions
    def insert_execution(self, row: ExecutionRow) -> int:
        fields_now = execution_fields(row)
        values = stored_execution_values(fields_now)
        next_id = self._known.next_execution_id
        if next_id is None or self._read_only:
            row.id = int(self._execute(EXECUTION_INSERT, values).lastrowid or 0)
        else:
            row.id = next_id
            self._unwritten[row.id] = values
        self._known.next_execution_id = row.id + 1
        self._changed.add(row.flow_id)
        self._executions_seen[row.id] = (fields_now, values)
        self._known.put_execution(row.flow_id, stored_execution_row(row.id, values))
        return row.id

    def get_execution(self, execution_id: int) -> ExecutionRow | None:
        kept = self._known.active_execution(execution_id)
        if kept is not None:
            self._saw([kept[0]], [kept[1]])
            return kept[0]
        rows = self._executions("WHERE e.id = ?", (execution_id,))
        return rows[0] if rows else None

    def update_execution(self, row: ExecutionRow) -> None:
        fields_now = execution_fields(row)
        before = self._executions_seen.get(row.id)
        changed: list[int] | None = None  # None: every column, as this transaction never saw it
        if before is None:
            values = stored_execution_values(fields_now)
        elif before[0][_FLOW_FIELD] != row.flow_id:
            stored_flow = str(before[0][_FLOW_FIELD])
            raise ValueError(moved_execution_message(row.id, stored_flow, row.flow_id))
        else:
            values, changed = changed_execution_values(fields_now, *before)
            # Nothing changed: the row is stored as it is, since this transaction read it.
            if not changed:
                return
        if row.id in self._unwritten:
            self._unwritten[row.id] = values  # its INSERT, at the commit, carries them
        elif changed is not None:
            # Read or written in this write transaction (a read keeps no rows seen), so
            # stored: its UPDATE can wait.
            pending = self._unupdated.get(row.id)
            positions = frozenset(changed) if pending is None else pending[1].union(changed)
            self._unupdated[row.id] = (values, positions)
        elif self._execute(*execution_update_statement(row.id, values, changed)).rowcount == 0:
            # Every column, and only where the row's Flow run is the stored one.
            stored = self._execute(
                "SELECT flow_id FROM step_executions WHERE id = ?", (row.id,)
            ).fetchone()
            if stored is None:
                raise LookupError(f"no Step execution with store ID {row.id} is stored")
            raise ValueError(moved_execution_message(row.id, str(stored[0]), row.flow_id))
        self._changed.add(row.flow_id)
        self._executions_seen[row.id] = (fields_now, values)
        self._known.put_execution(row.flow_id, stored_execution_row(row.id, values))

    def flow_executions(
        self, flow_id: str, statuses: Sequence[ExecutionStatus] | None = None
    ) -> Sequence[ExecutionRow]:
        if statuses is None:
            return self._executions("WHERE e.flow_id = ? ORDER BY e.id", (flow_id,))
        wanted = frozenset(status.value for status in statuses)
        if wanted <= ACTIVE_STATUSES:
            known = self._known.flow(flow_id)
            if known.active is None:
                known = self._known.keep_active(
                    flow_id, self._execute(_ACTIVE_SELECT, (flow_id,)).fetchall()
                )
            kept = known.executions(wanted)
            self._saw([row for row, _ in kept], [stored for _, stored in kept])
            return [row for row, _ in kept]
        marks = ", ".join("?" for _ in statuses)
        where = f"WHERE e.flow_id = ? AND e.status IN ({marks}) ORDER BY e.id"
        return self._executions(where, (flow_id, *(status.value for status in statuses)))

    def last_step_activity(self, flow_id: str) -> datetime | None:
        # The stored times are UTC at a fixed width (encode_time), so their text sorts as
        # they do; SQLite reads two columns where decoding the rows cost about 16 us each.
        newest = self._execute(_LAST_STEP_ACTIVITY, (flow_id,)).fetchone()
        texts = [text for text in newest if text is not None]
        return decode_time(max(texts)) if texts else None

    def prune_finished_executions(self, flow_id: str, keep: int) -> int:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        # Both lookups run on executions_by_flow_status (flow_id, status, id).
        sql = f"""DELETE FROM step_executions
            WHERE flow_id = ? AND status IN {_FINISHED} AND id < (
                SELECT id FROM step_executions WHERE flow_id = ? AND status IN {_FINISHED}
                ORDER BY id DESC LIMIT 1 OFFSET ?)"""
        self._executions_seen.clear()  # deleted rows must not look stored
        self._changed.add(flow_id)
        return int(self._execute(sql, (flow_id, flow_id, keep - 1)).rowcount)

    def claimable_executions(self, now: datetime, limit: int) -> Sequence[ExecutionRow]:
        check_limit(limit)
        return self._executions(CLAIMABLE_WHERE, (encode_time(utc_time(now, "now")), limit))

    def due_timer_executions(self, now: datetime) -> Sequence[ExecutionRow]:
        return self._executions(DUE_TIMERS_WHERE, (encode_time(utc_time(now, "now")),))

    def expired_lease_executions(self, now: datetime) -> Sequence[ExecutionRow]:
        return self._executions(EXPIRED_LEASES_WHERE, (encode_time(utc_time(now, "now")),))

    def leased_executions(self, owner: str) -> Sequence[ExecutionRow]:
        return self._executions(LEASED_WHERE, (owner,))

    def lease_owners(self) -> set[str]:
        # On the index of running executions by lease owner.
        sql = "SELECT DISTINCT lease_owner FROM step_executions WHERE status = 'running'"
        return {owner for (owner,) in self._execute(sql) if owner is not None}

    def cancel_requested_executions(self, owner: str) -> Sequence[int]:
        sql = """SELECT id FROM step_executions
            WHERE status = 'running' AND lease_owner = ? AND cancel_requested = 1 ORDER BY id"""
        return [int(execution_id) for (execution_id,) in self._execute(sql, (owner,))]

    def next_timer_at(self) -> datetime | None:
        return decode_time(self._execute(NEXT_TIMER_SELECT).fetchone()[0])

    def next_step_number(self, flow_id: str, step_type: str) -> int:
        sql = """INSERT INTO step_counters (flow_id, step_type, n) VALUES (?, ?, 1)
            ON CONFLICT (flow_id, step_type) DO UPDATE SET n = n + 1 RETURNING n"""
        return int(self._execute(sql, (flow_id, step_type)).fetchall()[0][0])

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
