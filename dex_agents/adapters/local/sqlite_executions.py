"""A SQLite store transaction's Step execution rows: read, inserted and updated as SQL.

An execution this transaction inserts or changes is written at the commit, or before
the next statement that names ``step_executions``, in one statement that carries
every change (``_write_pending``); an update writes only the columns it changes.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime

from dex_agents.adapters.local.known_rows import ACTIVE_STATUSES, KnownRows
from dex_agents.adapters.local.sqlite_row_reads import decode_execution
from dex_agents.adapters.local.sqlite_rows import (
    EXECUTION_DATA_POSITIONS,
    EXECUTION_INSERT,
    changed_execution_values,
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
from dex_agents.adapters.local.store_rows import (
    check_limit,
    moved_execution_message,
    utc_time,
)
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus

_FLOW_FIELD = EXECUTION_DATA.index("flow_id")  # in ``execution_fields`` and stored values
_FINISHED = "('completed', 'failed', 'cancelled')"

_ACTIVE_SELECT = (
    f"SELECT {EXECUTION_SELECT} FROM step_executions e WHERE e.flow_id = ? "
    f"AND e.status IN ({', '.join(repr(status) for status in sorted(ACTIVE_STATUSES))}) "
    "ORDER BY e.id"
)

_LAST_STEP_ACTIVITY = (
    "SELECT max(created_at), max(finished_at) FROM step_executions WHERE flow_id = ?"
)

_COUNT_STEP = """INSERT INTO step_counters (flow_id, step_type, n) VALUES (?, ?, 1)
    ON CONFLICT (flow_id, step_type) DO UPDATE SET n = n + 1"""

_STEP_COUNT = "SELECT n FROM step_counters WHERE flow_id = ? AND step_type = ?"

# Counted from the number this connection kept: only where the stored count is still that
# number, so a count another connection moved meanwhile is never counted over.
_COUNT_KEPT_STEP = """UPDATE step_counters SET n = n + 1
    WHERE flow_id = ? AND step_type = ? AND n = ?"""


_STORED_DATA: Callable[[Sequence[object]], tuple[object, ...]] = operator.itemgetter(
    *EXECUTION_DATA_POSITIONS
)
"""A read row's stored ``EXECUTION_DATA`` values, taken in C: a turn sees about 20 rows."""


class SqliteExecutions:
    """Mixed into ``SqliteTransaction``, which provides ``_execute``, ``_known`` (what the
    connection keeps), ``_changed`` (the runs its commit logs), ``_read_only``, and the
    executions it saw, has not written and has not updated yet (its ``__init__`` says
    what each holds)."""

    _known: KnownRows
    _changed: set[str]
    _read_only: bool
    _executions_seen: dict[int, tuple[tuple[object, ...], Sequence[object]]]
    _unwritten: dict[int, list[object]]
    _unupdated: dict[int, tuple[list[object], frozenset[int]]]

    def _execute(
        self, sql: str, params: Sequence[object] | dict[str, object] = (), *, apart: bool = False
    ) -> sqlite3.Cursor:
        raise NotImplementedError

    def _write_pending(self) -> None:
        """Write the kept INSERTs of new executions, then the kept UPDATEs of stored ones."""
        unwritten, self._unwritten = self._unwritten, {}
        for execution_id, values in unwritten.items():
            self._execute(*execution_insert_statement(execution_id, values))
        unupdated, self._unupdated = self._unupdated, {}
        for execution_id, (values, changed) in unupdated.items():
            self._execute(*execution_update_statement(execution_id, values, sorted(changed)))

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
        # The number this connection counted last for the Step type, when it kept it: one
        # statement, where counting and reading are two (five new Steps a tool turn).
        numbers = self._known.flow(flow_id).step_numbers
        kept = numbers.get(step_type)
        if (
            kept is not None
            and self._execute(_COUNT_KEPT_STEP, (flow_id, step_type, kept)).rowcount
        ):
            number = kept + 1
        else:
            # Counted, then read: a RETURNING clause makes SQLite gather its rows in an
            # ephemeral table, a B-tree opened and closed per statement (about 43 K
            # instructions against 26 K for both statements).
            key = (flow_id, step_type)
            self._execute(_COUNT_STEP, key)
            number = int(self._execute(_STEP_COUNT, key).fetchone()[0])
        numbers[step_type] = number
        return number
