"""A worker keeps a session's next Steps: they are claimed in the commit that made them runnable.

Without this, every Step costs a claim of its own: the worker commits a Step,
sees the change, and takes a second write transaction to lease the next one.
Here the commit that finishes a Step (or stores a wait) also decides the waits
of the Step executions it created (``inline_waits``) and leases the ones that
can run now to the committing worker, up to its free slots. A worker that dies
after such a commit holds leases it never started, so they lapse and the same
attempts are handed out again, as after any claim.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from dex_agents.adapters.local import claims, failure_routing, status_members, transitions
from dex_agents.adapters.local.in_commit import MOST_RUNS_PER_COMMIT, run_in_commit, runs_in_commit
from dex_agents.adapters.local.inline_waits import decide_wait_now
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.staged_state import StagedState
from dex_agents.adapters.local.step_context import LocalStepContext
from dex_agents.ports.engine import StepDecision
from dex_agents.ports.flow_rows import ExecutionRow
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.step_contexts import AttemptResult
from dex_agents.ports.step_waits import Wait


@dataclass(frozen=True)
class HandOff:
    """What a committing transaction did: whether it committed the attempt, and what it claimed.

    ``complete`` is ``False`` when the claims filled every slot offered, so more of
    the session may be runnable than was taken. ``cancel_requested`` names the
    worker's running attempts of the session that the commit asked to stop. ``ran``
    holds the contexts of the state-only Steps it ran (``in_commit``): ``settle_ran``
    them once it committed.
    """

    committed: bool
    claims: list[claims.Claim] = field(default_factory=list)
    complete: bool = True
    cancel_requested: set[int] = field(default_factory=set)
    ran: list[LocalStepContext] = field(default_factory=list)


def settle_ran(ran: Sequence[LocalStepContext]) -> None:
    """Tell the state-only Steps a commit ran that their results are committed: after it."""
    for context in ran:
        context.settle(AttemptResult())


R = TypeVar("R")


class HandOffTarget(Protocol):
    """A worker of this process that leases what a client's commit makes runnable, in that commit.

    Without one, a Step that an RPC or a new session made runnable waits for the
    worker's next claim round: a second write transaction, after a wake-up. Only
    a client on the worker's own event loop hands off.
    """

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the worker runs on."""
        ...

    async def commit_handing_off(
        self, work: Callable[[StoreTransaction, str, int], tuple[R, HandOff]]
    ) -> R:
        """Commit ``work(tx, owner, limit)`` durably and start the claims its hand-off took."""
        ...


def _hand_off_after(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    claimed: ExecutionRow,
    now: datetime,
    lease: timedelta,
    limit: int,
) -> HandOff:
    owner = claimed.lease_owner or ""
    return hand_off(tx, flow, claimed.flow_id, owner, now, lease, limit)


def hand_off(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    flow_id: str,
    owner: str,
    now: datetime,
    lease: timedelta,
    limit: int,
) -> HandOff:
    """Decide the new waits of a Flow run, lease up to ``limit`` of its runnable executions,
    and name ``owner``'s running ones that were asked to stop.

    A leased state-only Step runs in the commit (``in_commit``), and what it made
    runnable is handed off in turn, up to ``MOST_RUNS_PER_COMMIT`` Steps: every
    commit that hands off is durable, so their results are as durable as any Step's.
    """
    taken: list[claims.Claim] = []
    cancelled: set[int] = set()
    ran: list[LocalStepContext] = []
    complete = True
    runs_left = MOST_RUNS_PER_COMMIT
    while True:
        offered = limit - len(taken)
        found, stopping = _hand_off_once(tx, flow, flow_id, owner, now, lease, offered)
        cancelled |= stopping
        complete = complete and len(found) < offered
        ran_now = 0
        for claim in found:
            context = None
            if runs_left > 0 and runs_in_commit(flow, claim):
                context = run_in_commit(tx, flow, claim, now)
            if context is not None:
                runs_left -= 1
                ran_now += 1
                ran.append(context)
            else:
                taken.append(claim)
        if not ran_now:
            return HandOff(True, taken, complete=complete, cancel_requested=cancelled, ran=ran)
        complete = True  # the slots it freed are offered again


def run_claimed(
    tx: StoreTransaction,
    claimed: list[claims.Claim],
    limit: int,
    *,
    flows: dict[str, RegisteredFlow],
    owner: str,
    now: datetime,
    lease: timedelta,
) -> tuple[list[claims.Claim], list[LocalStepContext]]:
    """Run each claimed state-only Step in the claim round's commit (``in_commit``), and hand
    off what it made runnable: the claims left for the worker to start, ``limit`` at most,
    and the contexts of the Steps it ran, to ``settle_ran`` once the round committed.

    A claim round takes the Steps that another process's commit made runnable (a
    client process's message, in a deployment of client and worker processes), so
    ``AwaitUserMessage`` ran in a task of its own and committed in a second durable
    commit, as every Step did before hand-offs. It now runs as it would have run in the
    commit of a client of the worker's own process.
    """
    left: list[claims.Claim] = []
    ran: list[LocalStepContext] = []
    for index, claim in enumerate(claimed):
        flow = flows[claim.flow_type]
        context = run_in_commit(tx, flow, claim, now) if runs_in_commit(flow, claim) else None
        if context is None:
            left.append(claim)
            continue
        ran.append(context)
        # Its slot is free again: what the claims still to come leave is offered.
        free = limit - len(left) - (len(claimed) - index - 1)
        handed = hand_off(tx, flow, claim.row.flow_id, owner, now, lease, free)
        left += handed.claims
        ran += handed.ran
    return left, ran


def _hand_off_once(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    flow_id: str,
    owner: str,
    now: datetime,
    lease: timedelta,
    limit: int,
) -> tuple[list[claims.Claim], set[int]]:
    """One read of a Flow run's active Steps: decide new waits, lease up to ``limit`` runnable
    executions, and name ``owner``'s running ones that were asked to stop."""
    flow_row = tx.get_flow(flow_id)
    flow_running = flow_row is not None and flow_row.status is status_members.FLOW_RUNNING
    runnable = status_members.RUNNABLE
    wanted = [*runnable, status_members.RUNNING] if flow_running else [status_members.RUNNING]
    taken: list[claims.Claim] = []
    cancelled: set[int] = set()
    for row in tx.flow_executions(flow_id, wanted):
        if row.status is status_members.RUNNING:
            if row.cancel_requested and row.lease_owner == owner:
                cancelled.add(row.id)
            continue
        assert flow_row is not None  # only a running Flow's runnable Steps are read
        if row.status is status_members.PENDING_WAIT and not row.cancel_requested:
            wait = decide_wait_now(tx, flow, row, now)
            if wait is not None:
                transitions.store_wait(tx, row, wait, now)
        if row.status not in runnable or len(taken) >= limit:
            continue
        if row.not_before is not None and row.not_before > now:
            continue  # a retry's delay has not passed
        # The Flow run was read above: its run ID goes with each claim.
        claim = claims.take(tx, flow, row, owner, now, lease, run_id=flow_row.run_id)
        if claim is not None:
            taken.append(claim)
    return taken, cancelled


def commit_execute(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    claimed: ExecutionRow,
    staged: StagedState,
    decision: StepDecision,
    now: datetime,
    lease: timedelta,
    limit: int,
) -> HandOff:
    """``transitions.commit_execute``, then the hand-off; not ``committed`` if the lease was lost."""
    if not transitions.commit_execute(tx, flow, claimed, staged, decision, now):
        return HandOff(False)
    return _hand_off_after(tx, flow, claimed, now, lease, limit)


def submit_wait(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    claimed: ExecutionRow,
    wait: Wait,
    now: datetime,
    lease: timedelta,
    limit: int,
) -> HandOff:
    """``transitions.submit_wait``, then the hand-off: a wait ready at once runs at once.

    The worker commits it durably, as every commit whose claims it starts.
    """
    if transitions.holds_lease(tx, claimed) is None:
        return HandOff(False)
    transitions.submit_wait(tx, claimed, wait, now, flow.step_history_limit)
    return _hand_off_after(tx, flow, claimed, now, lease, limit)


def fail_attempt(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    claimed: ExecutionRow,
    error_type: str,
    detail: str,
    now: datetime,
    lease: timedelta,
    limit: int,
    retry_delay: timedelta | None = None,
) -> HandOff:
    """``failure_routing.fail_attempt``, then the hand-off of a failure Step it started."""
    if transitions.holds_lease(tx, claimed) is None:
        return HandOff(False)
    failure_routing.fail_attempt(tx, flow, claimed, error_type, detail, now, retry_delay)
    return _hand_off_after(tx, flow, claimed, now, lease, limit)
