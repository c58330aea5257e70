"""The Step executions' ``StoreTransaction`` primitives over the in-memory tables.

Each execution is kept by ID, indexed per session (IDs in order) and, while it is
active, in the set of active executions and its session's set, so the reads of
claims, timers and leases walk the active ones alone, as the SQLite store's indexes do.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial

from dex_agents.adapters.local.memory_parts import MemoryPart
from dex_agents.adapters.local.store_rows import (
    check_limit,
    moved_execution_message,
    normalized_execution,
    row_copy,
    utc_time,
)
from dex_agents.ports.flow_rows import (
    ACTIVE_EXECUTION_STATUSES,
    ExecutionRow,
    ExecutionStatus,
    FlowStatus,
)

_CLAIMABLE = (ExecutionStatus.PENDING_WAIT, ExecutionStatus.READY)


class MemoryExecutions(MemoryPart):
    """Mixed into ``MemoryTransaction`` (``memory_parts.MemoryPart``)."""

    def _store_execution(self, row: ExecutionRow) -> None:
        self._put(self._t.executions, row.id, row)
        final = row.status.is_final
        for active in (self._t.active, self._t.active_by_flow.setdefault(row.flow_id, set())):
            if final and row.id in active:
                active.discard(row.id)
                self.undo.append(partial(active.add, row.id))
            elif not final and row.id not in active:
                active.add(row.id)
                self.undo.append(partial(active.discard, row.id))

    def insert_execution(self, row: ExecutionRow) -> int:
        stored = normalized_execution(row)
        stored.id = self._next_id("execution")
        self._store_execution(stored)
        ids = self._t.flow_executions.setdefault(row.flow_id, [])
        ids.append(stored.id)
        self.undo.append(ids.pop)
        row.id = stored.id
        return stored.id

    def get_execution(self, execution_id: int) -> ExecutionRow | None:
        row = self._t.executions.get(execution_id)
        return None if row is None else row_copy(row)

    def update_execution(self, row: ExecutionRow) -> None:
        stored = normalized_execution(row)
        old = self._t.executions.get(row.id)
        if old is None:
            raise LookupError(f"no Step execution with store ID {row.id} is stored")
        if old.flow_id != row.flow_id:
            raise ValueError(moved_execution_message(row.id, old.flow_id, row.flow_id))
        self._store_execution(stored)

    def _active_rows(self, statuses: Sequence[ExecutionStatus]) -> list[ExecutionRow]:
        rows = (self._t.executions[i] for i in sorted(self._t.active))
        return [row for row in rows if row.status in statuses]

    def flow_executions(
        self, flow_id: str, statuses: Sequence[ExecutionStatus] | None = None
    ) -> Sequence[ExecutionRow]:
        if statuses is not None and not any(status.is_final for status in statuses):
            ids: Sequence[int] = sorted(self._t.active_by_flow.get(flow_id, ()))
        else:
            ids = self._t.flow_executions.get(flow_id, [])
        rows = (self._t.executions[i] for i in ids)
        return [row_copy(row) for row in rows if statuses is None or row.status in statuses]

    def last_step_activity(self, flow_id: str) -> datetime | None:
        rows = (self._t.executions[i] for i in self._t.flow_executions.get(flow_id, ()))
        moments = [moment for row in rows for moment in (row.created_at, row.finished_at) if moment]
        return max(moments, default=None)

    def prune_finished_executions(self, flow_id: str, keep: int) -> int:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        ids = self._t.flow_executions.get(flow_id, [])
        finished = [i for i in ids if self._t.executions[i].status.is_final]
        doomed = set(finished[:-keep])
        if not doomed:
            return 0
        self._put(self._t.flow_executions, flow_id, [i for i in ids if i not in doomed])
        for execution_id in doomed:
            self._pop(self._t.executions, execution_id)
        return len(doomed)

    def _flow_running(self, flow_id: str) -> bool:
        flow = self._t.flows.get(flow_id)
        return flow is not None and flow.status is FlowStatus.RUNNING

    def claimable_executions(self, now: datetime, limit: int) -> Sequence[ExecutionRow]:
        check_limit(limit)
        now = utc_time(now, "now")
        rows = [
            row
            for row in self._active_rows(_CLAIMABLE)
            if (row.not_before is None or row.not_before <= now) and self._flow_running(row.flow_id)
        ]
        return [row_copy(row) for row in rows[:limit]]

    def due_timer_executions(self, now: datetime) -> Sequence[ExecutionRow]:
        now = utc_time(now, "now")
        rows = self._active_rows((ExecutionStatus.WAITING,))
        return [row_copy(r) for r in rows if r.timer_at is not None and r.timer_at <= now]

    def expired_lease_executions(self, now: datetime) -> Sequence[ExecutionRow]:
        now = utc_time(now, "now")
        rows = self._active_rows((ExecutionStatus.RUNNING,))
        return [
            row_copy(r) for r in rows if r.lease_expires_at is not None and r.lease_expires_at < now
        ]

    def leased_executions(self, owner: str) -> Sequence[ExecutionRow]:
        rows = self._active_rows((ExecutionStatus.RUNNING,))
        return [row_copy(row) for row in rows if row.lease_owner == owner]

    def lease_owners(self) -> set[str]:
        rows = self._active_rows((ExecutionStatus.RUNNING,))
        return {row.lease_owner for row in rows if row.lease_owner is not None}

    def cancel_requested_executions(self, owner: str) -> Sequence[int]:
        rows = self._active_rows((ExecutionStatus.RUNNING,))
        return [row.id for row in rows if row.lease_owner == owner and row.cancel_requested]

    def next_timer_at(self) -> datetime | None:
        times: list[datetime] = []
        for row in self._active_rows(ACTIVE_EXECUTION_STATUSES):
            if row.status is ExecutionStatus.WAITING and row.timer_at is not None:
                times.append(row.timer_at)
            elif (
                row.status in _CLAIMABLE
                and row.not_before is not None
                and self._flow_running(row.flow_id)
            ):
                times.append(row.not_before)
        return min(times, default=None)

    def next_step_number(self, flow_id: str, step_type: str) -> int:
        number = self._t.step_counters.get((flow_id, step_type), 0) + 1
        self._put(self._t.step_counters, (flow_id, step_type), number)
        return number
