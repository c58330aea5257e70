"""Claims: which worker runs which attempt, and what a running attempt records under its lease.

A worker claims a runnable execution under a lease and renews it while the
attempt runs, recording its heartbeats and live events. What becomes of a
lease its worker can no longer run is ``lease_recovery.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from dex_agents.adapters.local import status_members
from dex_agents.adapters.local.damaged_values import is_undecodable, scrub_undecodable_text
from dex_agents.adapters.local.lease_recovery import recover_gone_leases, recover_lapsed_leases
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.state_sources import (
    Snapshot,
    read_snapshot,
)
from dex_agents.adapters.local.transitions import (
    end_wait_phase,
    finish,
    holds_lease,
    satisfy_wait,
)
from dex_agents.ports.engine import ENGINE_LOGGER as logger
from dex_agents.ports.flow_client import STEP_CANCELLED_EVENT
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import StoreTransaction

if TYPE_CHECKING:
    from dex_agents.adapters.local.step_context import LocalStepContext


@dataclass(frozen=True)
class Claim:
    """An execution a worker claimed, which phase it runs, and the state that phase loads.

    The claiming transaction reads the state, as Dex loads a Step's state when it
    hands out the task: a snapshot that was true when the lease was taken. A
    session whose stored state cannot be read gets no snapshot (``None``), and its
    worker reads it again, so one damaged session never stops the commit that
    serves the others.
    """

    row: ExecutionRow
    phase: str  # "wait" or "execute"
    flow_type: str
    snapshot: Snapshot | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class ClaimRound:
    """One round of a worker's claim loop, in one transaction: what it left for the worker to
    start, which of its running attempts were cancelled, when it must look again without a
    commit, and whether it took everything runnable it found.

    ``complete`` is ``False`` when the round claimed as many Steps as it could, or left
    as many claims as it had slots: more may be runnable. Count what it claimed, not
    only what it left to start: Steps it ran in its commit (``handoff.run_claimed``)
    freed their slots, and a round that filled its limit with them saw no more than
    that limit of a larger burst (a client process starting many sessions at once).
    """

    claims: list[Claim]
    cancel_requested: set[int]
    next_timer_at: datetime | None
    complete: bool = False
    gone_owners: frozenset[str] = frozenset()
    """Other workers whose process ended and whose every lease the round recovered."""
    ran: Sequence[LocalStepContext] = ()
    """The state-only Steps the round ran in its commit, to settle once it committed."""


class RoundLimit(Protocol):
    """The slots a claim round may fill (``round_slots.RoundSlots``)."""

    def begin(self) -> int:
        """The round's transaction begins: the most it may claim."""
        ...

    def took(self, claimed: int) -> None:
        """The round claimed ``claimed`` Steps."""
        ...


class RunClaimed(Protocol):
    """What a claim round does with its claims in its own transaction, given its limit:
    the claims it leaves for the worker to start, and the contexts of the Steps it ran
    (``handoff.run_claimed``)."""

    def __call__(
        self,
        tx: StoreTransaction,
        claimed: list[Claim],
        limit: int,
        *,
        flows: dict[str, RegisteredFlow],
        owner: str,
        now: datetime,
        lease: timedelta,
    ) -> tuple[list[Claim], list[LocalStepContext]]: ...


def claim_round(
    tx: StoreTransaction,
    flows: dict[str, RegisteredFlow],
    owner: str,
    clock: Callable[[], datetime],
    lease: timedelta,
    slots: RoundLimit,
    run_claimed: RunClaimed,
    gone: Callable[[str], bool] | None = None,
) -> ClaimRound:
    """``claim`` of up to ``slots.begin()`` Steps, asked as the transaction runs (a worker
    lends slots to hand-offs until then and once it has claimed, ``round_slots.py``), then
    ``run_claimed`` of them (the claims it leaves for the worker to start), then the look
    of ``capacity_round``: the cancellations of ``owner``'s running attempts and the next
    Timer. With ``gone`` it first recovers the leases of other workers that it says are
    gone (``lease_recovery.recover_gone_leases``).

    The time is ``clock()`` as the transaction runs, not when the round was asked for: a
    round that waited for the write lock, or was tried again after a busy store, would
    lease from a time already past (by default the busy timeout is as long as a lease),
    and another worker would take over attempts that still run."""
    now = clock()
    gone_owners = frozenset() if gone is None else recover_gone_leases(tx, flows, owner, now, gone)
    limit = slots.begin()
    claimed = claim(tx, flows, owner, now, lease, limit)
    claims, ran = run_claimed(tx, claimed, limit, flows=flows, owner=owner, now=now, lease=lease)
    slots.took(len(claims))
    complete = len(claimed) < limit and len(claims) < limit
    return replace(
        capacity_round(tx, owner),
        claims=claims,
        complete=complete,
        gone_owners=gone_owners,
        ran=ran,
    )


def capacity_round(tx: StoreTransaction, owner: str) -> ClaimRound:
    """The round of a worker with no free slot, as a read: the cancellations of ``owner``'s
    running attempts, and the next Timer; not ``complete``, since it could claim nothing.

    Such a worker could claim nothing, so another process's commit gives it only
    cancellations to look for. Lost leases and due Timers wait for its next full
    round (``claim_round``): on its cadence, or when a slot frees.
    """
    return ClaimRound([], set(tx.cancel_requested_executions(owner)), tx.next_timer_at())


def claim(
    tx: StoreTransaction,
    flows: dict[str, RegisteredFlow],
    owner: str,
    now: datetime,
    lease: timedelta,
    limit: int,
) -> list[Claim]:
    """Recover lost leases, fire due Timers, then claim up to ``limit`` runnable executions."""
    recover_lapsed_leases(tx, flows, now)
    for row in tx.due_timer_executions(now):
        satisfy_wait(tx, row, now)
    claims: list[Claim] = []
    if limit <= 0:
        return claims
    for row in tx.claimable_executions(now, limit * 4 + 8):
        if len(claims) >= limit:
            break
        try:
            flow_row = tx.get_flow(row.flow_id)
        except Exception as error:
            if not is_undecodable(error):
                raise
            # A damaged Flow run's row (its input, output or failure text) is left for a
            # person to repair: raised, it failed every round of this worker, for ever,
            # and no other session's Step was claimed.
            scrub_undecodable_text(error)
            logger.error("%s: Flow run %r was not claimed: %s", owner, row.flow_id, error)
            continue
        flow = None if flow_row is None else flows.get(flow_row.flow_type)
        if flow is None or flow_row is None:
            continue  # a Flow type this process does not serve
        taken = take(tx, flow, row, owner, now, lease, run_id=flow_row.run_id)
        if taken is not None:
            claims.append(taken)
    return claims


def take(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    row: ExecutionRow,
    owner: str,
    now: datetime,
    lease: timedelta,
    *,
    run_id: str | None = None,
) -> Claim | None:
    """Lease one runnable execution to ``owner``, with the state its phase loads and the
    Flow run's ``run_id``; ``None`` when a lock it needs is held.

    A session whose stored state cannot be read (a damaged value) is leased with no
    snapshot: its worker reads the state again and fails that attempt alone, so the
    commit that leases it (a claim round, or another Step's or a client's commit) still
    commits. Any other error of that read is raised.
    """
    step = flow.step(row.step_type)
    options = flow.options(step, row.options)
    if row.status is status_members.PENDING_WAIT:
        phase = "wait"
        loads = options.wait_loads
    else:
        phase = "execute"
        loads = options.loads
        names = [lock.lock_name for lock in options.locks]
        if any(tx.lock_holder(row.flow_id, name) not in (None, row.id) for name in names):
            return None  # another Step method holds a lock this one needs
        for name in names:
            tx.acquire_lock(row.flow_id, name, row.id)
        if row.first_attempt_at is None:
            row.first_attempt_at = now
    row.status = status_members.RUNNING
    row.lease_owner = owner
    row.lease_expires_at = now + lease
    row.not_before = None
    tx.update_execution(row)
    try:
        snapshot = read_snapshot(tx, row.flow_id, flow.flow.schema, loads)
    except Exception as error:
        # Only a damaged value, which reads no better the next time. Any other fault (a
        # disk I/O error, after which SQLite may have rolled the transaction back) fails
        # the commit that leases it, which its worker logs and tries again: until
        # 2026-12-07 it was taken for a damaged value, and the commit went on unseen.
        if not is_undecodable(error):
            raise
        snapshot = None
    return Claim(row, phase, flow.flow_type, snapshot, run_id)


def renew_leases(
    tx: StoreTransaction, owner: str, ids: Sequence[int], now: datetime, lease: timedelta
) -> set[int]:
    """Extend the leases ``owner`` holds on ``ids``; return those whose cancellation was requested."""
    wanted = set(ids)
    cancelled: set[int] = set()
    for row in tx.leased_executions(owner):
        if row.id not in wanted:
            continue
        row.lease_expires_at = now + lease
        tx.update_execution(row)
        if row.cancel_requested:
            cancelled.add(row.id)
    return cancelled


def record_heartbeat(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    claimed: ExecutionRow,
    checkpoint: str | None,
    keep: bool,
    events: Sequence[str],
    now: datetime,
) -> bool:
    """Write the attempt's pending live events, mark it started, note the heartbeat and its
    checkpoint; ``False`` (nothing written) if the lease is lost."""
    row = holds_lease(tx, claimed)
    if row is None:
        return False
    row.attempt_started = True
    row.heartbeat_at = now
    if not keep:
        row.checkpoint = checkpoint
    tx.update_execution(row)
    _write_events(tx, flow, row, events, now)
    return True


def append_events(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    claimed: ExecutionRow,
    events: Sequence[str],
    now: datetime,
) -> bool:
    """Write live Stream events of a running attempt, marking it started; ``False`` (nothing
    written) only if its lease is lost. A Flow with no Stream writes and marks nothing."""
    row = holds_lease(tx, claimed)
    if row is None:
        return False
    if flow.flow.stream is not None:
        row.attempt_started = True
        tx.update_execution(row)
        _write_events(tx, flow, row, events, now)
    return True


def _write_events(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    row: ExecutionRow,
    events: Sequence[str],
    now: datetime,
) -> None:
    stream = flow.flow.stream
    if stream is None or not events:
        return
    for value in events:
        tx.append_event(flow.flow_type, row.flow_id, value, f"#{row.step_execution_id}", now)
    tx.trim_events(flow.flow_type, stream.capacity_bytes)


def retry_wait_phase(
    tx: StoreTransaction,
    claimed: ExecutionRow,
    now: datetime,
    delay: timedelta,
    history_limit: int | None,
) -> None:
    """Hand a wait phase that raised out again after ``delay``; it reads state only, so it is safe."""
    row = end_wait_phase(tx, claimed, now, history_limit)
    if row is None:
        return
    row.status = ExecutionStatus.PENDING_WAIT
    row.not_before = now + delay
    tx.update_execution(row)


def cancelled_while_running(
    tx: StoreTransaction, claimed: ExecutionRow, now: datetime, history_limit: int | None
) -> None:
    """Finish an attempt that stopped because its cancellation was requested."""
    row = holds_lease(tx, claimed)
    if row is not None:
        finish(tx, row, ExecutionStatus.CANCELLED, STEP_CANCELLED_EVENT, now, history_limit)
