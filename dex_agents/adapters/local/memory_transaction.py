"""One transaction of the in-memory ``FlowStore``: the ``StoreTransaction`` primitives over dicts.

Writes go to the live tables (``MemoryTables``) at once, each with the function
that undoes it in ``MemoryTransaction.undo``: ``MemoryFlowStore`` runs those
backwards when a transaction's work raises, and ``run_undoable`` when one work
of a batch does. The Stream's primitives are mixed in from ``memory_stream``,
the Step executions' from ``memory_executions``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, TypeVar, cast

from dex_agents.adapters.local.memory_executions import MemoryExecutions
from dex_agents.adapters.local.memory_stream import MemoryStream
from dex_agents.adapters.local.store_rows import (
    normalized_flow,
    row_copy,
    utc_time,
)
from dex_agents.ports.flow_rows import (
    EventRow,
    ExecutionRow,
    FlowRow,
    MessageRow,
)
from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction

K = TypeVar("K")
V = TypeVar("V")


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


class MemoryTransaction(MemoryStream, MemoryExecutions, StoreTransaction):
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
