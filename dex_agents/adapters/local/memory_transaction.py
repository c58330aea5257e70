"""One transaction of the in-memory ``FlowStore``: the ``StoreTransaction`` primitives over dicts.

Writes go to the live tables (``MemoryTables``) at once, each with the function
that undoes it in ``MemoryTransaction.undo``: ``MemoryFlowStore`` runs those
backwards when a transaction's work raises, and ``run_undoable`` when one work
of a batch does. The Stream's primitives are mixed in from ``memory_stream``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, TypeVar, cast

from dex_agents.adapters.local.memory_stream import MemoryStream
from dex_agents.adapters.local.store_rows import (
    check_limit,
    moved_execution_message,
    normalized_execution,
    normalized_flow,
    row_copy,
    utc_time,
)
from dex_agents.ports.flow_rows import (
    ACTIVE_EXECUTION_STATUSES,
    EventRow,
    ExecutionRow,
    ExecutionStatus,
    FlowRow,
    FlowStatus,
    MessageRow,
)
from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction

K = TypeVar("K")
V = TypeVar("V")


_CLAIMABLE = (ExecutionStatus.PENDING_WAIT, ExecutionStatus.READY)


@dataclass
class MemoryTables:
    """The rows of a ``MemoryFlowStore``, with the indexes its reads use."""

    flows: dict[str, FlowRow] = field(default_factory=dict)
    values: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    messages: dict[int, MessageRow] = field(default_factory=dict)
    message_seqs: dict[str, int] = field(default_factory=dict)
    # (flow, channel) -> key -> seqs of unconsumed messages; empty sets mean nothing.
    pending: dict[tuple[str, str], dict[str, set[int]]] = field(default_factory=dict)
    executions: dict[int, ExecutionRow] = field(default_factory=dict)
    active: set[int] = field(default_factory=set)
    # The active executions of each Flow run, so a session's waits are found without its history.
    active_by_flow: dict[str, set[int]] = field(default_factory=dict)
    flow_executions: dict[str, list[int]] = field(default_factory=dict)
    step_counters: dict[tuple[str, str], int] = field(default_factory=dict)
    locks: dict[tuple[str, str], int] = field(default_factory=dict)
    events: dict[int, tuple[EventRow, int]] = field(default_factory=dict)
    flow_events: dict[str, list[int]] = field(default_factory=dict)
    type_events: dict[str, deque[int]] = field(default_factory=dict)
    type_bytes: dict[str, int] = field(default_factory=dict)
    # The last ID handed out, as SQLite's sqlite_sequence keeps it (rolled back with the rest).
    last_ids: dict[str, int] = field(default_factory=lambda: {"seq": 0, "execution": 0, "event": 0})


class _EndedTables:
    """What an ended transaction reads its tables from: every read says it has ended."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            "this store transaction has ended; use it only inside the work FlowStore.run runs"
        )


_ENDED_TABLES = cast(MemoryTables, _EndedTables())


class MemoryTransaction(MemoryStream, StoreTransaction):
    """One transaction of a ``MemoryFlowStore``: it writes to the live tables and logs in
    ``undo`` how to undo each write, which the store runs backwards when the work raises."""

    def __init__(self, tables: MemoryTables) -> None:
        # A plain attribute, not a property that checks the end: a tool turn reads the
        # tables some 470 times, and that call was 2% of an in-memory turn's instructions.
        self._t = tables
        self.undo: list[Callable[[], object]] = []

    def end(self) -> None:
        self._t = _ENDED_TABLES

    def run_undoable(self, work: Callable[[], Any]) -> BatchOutcome:
        """Run ``work``; an ``Exception`` it raises undoes its writes, as far back as it began."""
        mark = len(self.undo)
        try:
            value = work()
        except Exception as error:
            undo = self.undo
            while len(undo) > mark:
                undo.pop()()
            return BatchOutcome(error=error)
        return BatchOutcome(value=value)

    def _put(self, mapping: MutableMapping[K, V], key: K, value: V) -> None:
        if key in mapping:
            self.undo.append(partial(mapping.__setitem__, key, mapping[key]))
        else:
            self.undo.append(partial(mapping.__delitem__, key))
        mapping[key] = value

    def _pop(self, mapping: MutableMapping[K, V], key: K) -> V:
        value = mapping.pop(key)
        self.undo.append(partial(mapping.__setitem__, key, value))
        return value

    def _next_id(self, sequence: str) -> int:
        new = self._t.last_ids[sequence] + 1
        self._put(self._t.last_ids, sequence, new)
        return new

    # Flow runs
    def get_flow(self, flow_id: str) -> FlowRow | None:
        row = self._t.flows.get(flow_id)
        return None if row is None else row_copy(row)

    def insert_flow(self, row: FlowRow) -> None:
        stored = normalized_flow(row)
        if row.flow_id in self._t.flows:
            raise ValueError(f"a Flow run with ID {row.flow_id!r} is already stored")
        self._put(self._t.flows, row.flow_id, stored)

    def update_flow(self, row: FlowRow) -> None:
        stored = normalized_flow(row)
        if row.flow_id not in self._t.flows:
            raise LookupError(f"no Flow run with ID {row.flow_id!r} is stored")
        self._put(self._t.flows, row.flow_id, stored)

    def list_flows(self) -> Sequence[FlowRow]:
        rows = sorted(self._t.flows.values(), key=lambda row: row.created_at)
        return [row_copy(row) for row in rows]

    # Attribute values
    def get_value(self, flow_id: str, name: str, key: str) -> str | None:
        return self._t.values.get((flow_id, name), {}).get(key)

    def get_values(self, flow_id: str, name: str) -> dict[str, str]:
        return dict(sorted(self._t.values.get((flow_id, name), {}).items()))

    def get_write_once_values(
        self, flow_id: str, name: str, keys: Sequence[str] | None = None
    ) -> dict[str, str]:
        # Values are in memory already: there is nothing to save.
        if keys is None:
            return self.get_values(flow_id, name)
        stored = self._t.values.get((flow_id, name), {})
        return {key: stored[key] for key in sorted(set(keys)) if key in stored}

    def get_singletons(self, flow_id: str, names: Sequence[str]) -> dict[str, str]:
        found = {name: self.get_value(flow_id, name, "") for name in names}
        return {name: value for name, value in found.items() if value is not None}

    def put_value(self, flow_id: str, name: str, key: str, value: str) -> None:
        self._put(self._t.values.setdefault((flow_id, name), {}), key, value)

    def delete_value(self, flow_id: str, name: str, key: str) -> None:
        instances = self._t.values.get((flow_id, name), {})
        if key in instances:
            self._pop(instances, key)

    def write_values(self, flow_id: str, writes: Mapping[tuple[str, str], str | None]) -> None:
        for (name, key), value in writes.items():
            if value is None:
                self.delete_value(flow_id, name, key)
            else:
                self.put_value(flow_id, name, key, value)

    # Channel messages
    def _pending_seqs(self, flow_id: str, channel: str, key: str) -> set[int]:
        return self._t.pending.setdefault((flow_id, channel), {}).setdefault(key, set())

    def append_message(
        self,
        flow_id: str,
        channel: str,
        key: str,
        message_id: str,
        value: str,
        created_at: datetime,
    ) -> int:
        when = utc_time(created_at, "created_at")
        if message_id in self._t.message_seqs:
            raise ValueError(f"a Channel message with ID {message_id!r} is already stored")
        seq = self._next_id("seq")
        row = MessageRow(seq, flow_id, channel, key, message_id, value, when)
        self._put(self._t.messages, seq, row)
        self._put(self._t.message_seqs, message_id, seq)
        pending = self._pending_seqs(flow_id, channel, key)
        pending.add(seq)
        self.undo.append(partial(pending.discard, seq))
        return seq

    def pending_messages(self, flow_id: str, channel: str, key: str) -> Sequence[MessageRow]:
        seqs = self._t.pending.get((flow_id, channel), {}).get(key, set())
        return [self._t.messages[seq] for seq in sorted(seqs)]

    def pending_counts(self, flow_id: str, channels: Sequence[str]) -> dict[str, int]:
        counts = {name: len(self.pending_messages(flow_id, name, "")) for name in channels}
        return {name: count for name, count in counts.items() if count}

    def pending_channel_keys(self, flow_id: str, channel: str) -> Sequence[str]:
        instances = self._t.pending.get((flow_id, channel), {})
        firsts = sorted((min(seqs), key) for key, seqs in instances.items() if seqs)
        return [key for _, key in firsts]

    def _unpend(self, row: MessageRow) -> bool:
        pending = self._pending_seqs(row.flow_id, row.channel, row.key)
        if row.seq not in pending:
            return False
        pending.discard(row.seq)
        self.undo.append(partial(pending.add, row.seq))
        return True

    def consume_messages(self, seqs: Sequence[int]) -> None:
        for seq in seqs:
            row = self._t.messages.get(seq)
            if row is not None:
                self._unpend(row)

    def restore_messages(self, seqs: Sequence[int]) -> None:
        for seq in seqs:
            row = self._t.messages.get(seq)
            if row is None:
                continue
            pending = self._pending_seqs(row.flow_id, row.channel, row.key)
            if seq not in pending:
                pending.add(seq)
                self.undo.append(partial(pending.discard, seq))

    def delete_consumed_messages(self, seqs: Sequence[int]) -> None:
        for seq in seqs:
            row = self._t.messages.get(seq)
            if row is None or seq in self._pending_seqs(row.flow_id, row.channel, row.key):
                continue
            self._pop(self._t.messages, seq)
            self._pop(self._t.message_seqs, row.message_id)

    def delete_message(self, flow_id: str, message_id: str) -> bool:
        seq = self._t.message_seqs.get(message_id)
        row = None if seq is None else self._t.messages[seq]
        if row is None or row.flow_id != flow_id or not self._unpend(row):
            return False
        self._pop(self._t.messages, row.seq)
        self._pop(self._t.message_seqs, message_id)
        return True

    # Step executions
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

    # Locks
    def lock_holder(self, flow_id: str, lock_name: str) -> int | None:
        return self._t.locks.get((flow_id, lock_name))

    def acquire_lock(self, flow_id: str, lock_name: str, execution_id: int) -> None:
        holder = self._t.locks.get((flow_id, lock_name))
        if holder is None:
            self._put(self._t.locks, (flow_id, lock_name), execution_id)
        elif holder != execution_id:
            raise ValueError(
                f"lock {lock_name!r} of Flow run {flow_id!r} is held by Step execution {holder}"
            )

    def release_locks(self, execution_id: int) -> None:
        held = [name for name, holder in self._t.locks.items() if holder == execution_id]
        for name in held:
            self._pop(self._t.locks, name)
