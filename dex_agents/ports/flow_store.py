"""The embedded engine's storage port: rows and the transaction they are read and written in.

The embedded engine keeps a Flow run's whole durable state in a ``FlowStore``:
Flow runs, Attribute values, Channel messages, Step executions, locks and Stream
events. The engine's rules (claiming, waiting, retrying, committing) are written
once over these primitives; a store only stores. Two stores implement it: an
SQLite file (durable, shared by processes) and an in-memory one (one process,
the same semantics except durability).

Every call of ``FlowStore.run`` is one atomic transaction: either all its writes
happen or none does, and no other transaction sees a half of it. Transactions
are serialized. ``run`` blocks; the engine calls it from a worker thread. A
store that can tell at once whether a transaction would wait for a lock is also
an ``InlineFlowStore``: the engine then runs the transactions that would not on
its event loop's thread, and only those that would on the worker thread.

Values travel as JSON text in the wire form of ``dex_agents.domain.wire``; the
store never decodes them. Times are timezone-aware UTC datetimes.

The rows themselves are in ``dex_agents.ports.flow_rows``; what a store may
offer beyond transactions (its own events, write signals, worker marks, a change
log) is in ``dex_agents.ports.store_capabilities``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from dex_agents.ports.flow_rows import (
    EventRow,
    ExecutionRow,
    ExecutionStatus,
    FlowRow,
    MessageRow,
)

R = TypeVar("R")


class StoreTransaction(Protocol):
    """The primitives one store transaction offers. Reads see this transaction's writes."""

    def run_undoable(self, work: Callable[[], Any]) -> BatchOutcome:
        """Run ``work`` inside this transaction; if it raises an ``Exception``, undo only what
        it wrote and return that error in the outcome. A failure of the store itself, which
        leaves the transaction unusable, is raised as it is."""
        ...

    # Flow runs
    def get_flow(self, flow_id: str) -> FlowRow | None:
        """A Flow run, or ``None``."""
        ...

    def insert_flow(self, row: FlowRow) -> None:
        """Add a Flow run; its ID must be new."""
        ...

    def update_flow(self, row: FlowRow) -> None:
        """Replace a Flow run's row."""
        ...

    def list_flows(self) -> Sequence[FlowRow]:
        """Every Flow run, oldest first."""
        ...

    # Attribute values; ``key`` is "" for a singleton Attribute
    def get_value(self, flow_id: str, name: str, key: str) -> str | None:
        """One value, or ``None`` when unset."""
        ...

    def get_values(self, flow_id: str, name: str) -> dict[str, str]:
        """Every instance of an AttributeMap by key."""
        ...

    def get_write_once_values(
        self, flow_id: str, name: str, keys: Sequence[str] | None = None
    ) -> dict[str, str]:
        """Every instance of a ``write_once`` AttributeMap by key (or those of ``keys`` that are
        set); a store may keep their text."""
        ...

    def get_singletons(self, flow_id: str, names: Sequence[str]) -> dict[str, str]:
        """The set values of these singleton Attributes by name, in one read."""
        ...

    def put_value(self, flow_id: str, name: str, key: str, value: str) -> None:
        """Set one value."""
        ...

    def delete_value(self, flow_id: str, name: str, key: str) -> None:
        """Unset one value; unsetting an unset value does nothing."""
        ...

    def write_values(self, flow_id: str, writes: Mapping[tuple[str, str], str | None]) -> None:
        """Set each ``(name, key)`` of ``writes`` to its value, or unset it where that is
        ``None``: what ``put_value`` and ``delete_value`` do, for many values in one call."""
        ...

    # Channel messages; ``key`` is "" for a plain Channel
    def append_message(
        self,
        flow_id: str,
        channel: str,
        key: str,
        message_id: str,
        value: str,
        created_at: datetime,
    ) -> int:
        """Append a message; return its ``seq``."""
        ...

    def pending_messages(self, flow_id: str, channel: str, key: str) -> Sequence[MessageRow]:
        """The unconsumed messages of a Channel (or ChannelMap instance), oldest first."""
        ...

    def pending_channel_keys(self, flow_id: str, channel: str) -> Sequence[str]:
        """The instance keys of a ChannelMap with unconsumed messages."""
        ...

    def pending_counts(self, flow_id: str, channels: Sequence[str]) -> dict[str, int]:
        """How many unconsumed messages each of these Channels holds (absent: none), in one read."""
        ...

    def consume_messages(self, seqs: Sequence[int]) -> None:
        """Mark messages consumed; they are not pending again unless ``restore_messages``."""
        ...

    def restore_messages(self, seqs: Sequence[int]) -> None:
        """Make consumed messages pending again, in their original order (by ``seq``).

        For the messages a cancelled execution's wait took: it never acted on them,
        so they wait for the next Step as if no wait had taken them.
        """
        ...

    def delete_consumed_messages(self, seqs: Sequence[int]) -> None:
        """Delete consumed messages for good (a message still waiting is left alone)."""
        ...

    def delete_message(self, flow_id: str, message_id: str) -> bool:
        """Delete an unconsumed message; ``False`` when none has that ID."""
        ...

    # Step executions
    def insert_execution(self, row: ExecutionRow) -> int:
        """Add a Step execution; return its store ID (also set on ``row.id``)."""
        ...

    def get_execution(self, execution_id: int) -> ExecutionRow | None:
        """A Step execution by store ID."""
        ...

    def update_execution(self, row: ExecutionRow) -> None:
        """Replace a Step execution's row (``LookupError`` when none has its ID). Its Flow
        run stays the one it was created in: ``ValueError`` when ``row.flow_id`` names
        another."""
        ...

    def flow_executions(
        self, flow_id: str, statuses: Sequence[ExecutionStatus] | None = None
    ) -> Sequence[ExecutionRow]:
        """A Flow run's Step executions, oldest first, optionally only with these statuses."""
        ...

    def last_step_activity(self, flow_id: str) -> datetime | None:
        """When a Step execution of the Flow run was last created or last finished (the
        later of the two), ``None`` when it has none: what a listing shows as a session's
        last activity, without reading its executions."""
        ...

    def prune_finished_executions(self, flow_id: str, keep: int) -> int:
        """Delete a Flow run's finished executions but its newest ``keep``; return how many went."""
        ...

    def claimable_executions(self, now: datetime, limit: int) -> Sequence[ExecutionRow]:
        """``pending_wait`` and ``ready`` executions of running Flows due at ``now``, oldest first."""
        ...

    def due_timer_executions(self, now: datetime) -> Sequence[ExecutionRow]:
        """``waiting`` executions whose ``timer_at`` is at or before ``now``."""
        ...

    def expired_lease_executions(self, now: datetime) -> Sequence[ExecutionRow]:
        """``running`` executions whose lease expired before ``now``."""
        ...

    def leased_executions(self, owner: str) -> Sequence[ExecutionRow]:
        """``running`` executions that ``owner`` holds."""
        ...

    def lease_owners(self) -> set[str]:
        """The owners of the leases of running executions."""
        ...

    def cancel_requested_executions(self, owner: str) -> Sequence[int]:
        """The IDs of the ``running`` executions ``owner`` holds whose cancellation was
        requested, in ID order: what ``leased_executions`` tells of cancellations, for a
        worker that looks at every commit without reading each row."""
        ...

    def next_timer_at(self) -> datetime | None:
        """The earliest instant the engine must wake without a commit: a ``waiting`` execution's
        ``timer_at``, or the ``not_before`` of a ``pending_wait`` or ``ready`` execution of a
        running Flow."""
        ...

    def next_step_number(self, flow_id: str, step_type: str) -> int:
        """The next ``n`` of ``<StepType>-<n>`` in this Flow run, from 1."""
        ...

    # Locks
    def lock_holder(self, flow_id: str, lock_name: str) -> int | None:
        """The execution that holds a lock, or ``None``."""
        ...

    def acquire_lock(self, flow_id: str, lock_name: str, execution_id: int) -> None:
        """Take a lock for an execution; the caller checked it was free."""
        ...

    def release_locks(self, execution_id: int) -> None:
        """Release every lock an execution holds."""
        ...

    # Stream events
    def append_event(
        self, flow_type: str, flow_id: str, value: str, source: str, created_at: datetime
    ) -> int:
        """Append a Stream event; return its ID."""
        ...

    def events_after(self, flow_id: str, after_id: int, limit: int) -> Sequence[EventRow]:
        """A Flow run's retained events with IDs after ``after_id``, oldest first."""
        ...

    def last_event_id(self, flow_id: str) -> int:
        """The ID of a Flow run's newest event, ``0`` when it has none; a cheap lookup."""
        ...

    def get_event(self, event_id: int) -> EventRow | None:
        """One retained event, or ``None`` when it was trimmed or never existed."""
        ...

    def trim_events(self, flow_type: str, capacity_bytes: int) -> int:
        """Delete a Flow type's oldest events until their values fit ``capacity_bytes``; return how many."""
        ...


@dataclass(frozen=True)
class BatchOutcome:
    """What one work of ``FlowStore.run_batch`` came to: its ``value``, or the ``error`` it raised."""

    value: Any = None
    error: Exception | None = None


def run_each(
    run: Callable[[Callable[[StoreTransaction], Any]], Any],
    works: Sequence[Callable[[StoreTransaction], Any]],
) -> list[BatchOutcome]:
    """``run_batch`` as one transaction per work, through ``run``: for a store with no
    cheaper way to commit many, or a wrapper that must see each work on its own."""
    outcomes = []
    for work in works:
        try:
            outcomes.append(BatchOutcome(value=run(work)))
        except Exception as error:
            outcomes.append(BatchOutcome(error=error))
    return outcomes


class FlowStore(Protocol):
    """A store of Flow runs: atomic, serialized transactions over ``StoreTransaction``."""

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        """Run ``work`` in one transaction and commit it; roll back if ``work`` raises.

        ``durable=False`` may skip the commit's flush to disk. It is for writes the
        engine can lose to a power failure without harm (leases, claims, computed
        waits): a process crash still keeps them, the store keeps commits in order,
        and the next durable commit flushes them too.
        """
        ...

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        """Run independent works in order as one commit, each as if in a transaction of its own.

        A work that raises an ``Exception`` undoes only its own writes, and its
        outcome holds the error; the others commit. A failure of the store itself
        raises, and nothing is written.
        """
        ...

    def read(self, work: Callable[[StoreTransaction], R]) -> R:
        """Run read-only ``work`` on a consistent snapshot; it must not write.

        A read never holds up a writer for long: the SQLite store reads a WAL
        snapshot without the write lock.
        """
        ...

    def change_counter(self) -> int:
        """A number that changes whenever any process commits a change.

        A cheap poll that never waits behind a transaction: the engine calls it on its
        event loop's thread.
        """
        ...

    def close(self) -> None:
        """Release the store's resources."""
        ...


class StoreWouldWaitError(Exception):
    """An ``InlineFlowStore`` try found a lock taken: nothing ran; run it where waiting is fine.

    Not a store fault: the same work run with ``run``, ``run_batch`` or ``read``
    waits for the lock as usual.
    """


@runtime_checkable
class InlineFlowStore(FlowStore, Protocol):
    """A ``FlowStore`` that can try a transaction without waiting for any lock.

    The engine runs the tries on its event loop's thread, so a try never waits:
    when another thread or process holds a lock the transaction needs, it raises
    ``StoreWouldWaitError`` before running any work, and the engine runs the same
    work with ``run_batch`` or ``read`` on its store thread instead. A try that
    began runs exactly as those do, its commit's flush included.
    """

    def try_run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        """``run_batch``, or ``StoreWouldWaitError`` with nothing run when it would wait."""
        ...

    def try_read(self, work: Callable[[StoreTransaction], R]) -> R:
        """``read``, or ``StoreWouldWaitError`` with nothing run when it would wait."""
        ...
