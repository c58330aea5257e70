"""Lease recovery: what becomes of the work a lease held once its worker can no longer run it.

A lease lapses when its worker died or hung; a worker whose process ended (its
mark is free) loses its leases at once, as does the earlier process of a
restarted worker's ID; a worker that stops cleanly hands back what it never
started. An attempt that never reached the Step's code is handed out again as
the same attempt; one that did has failed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from dex_agents.adapters.local.failure_routing import fail_execution
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.transitions import finish
from dex_agents.ports.flow_client import STEP_CANCELLED_EVENT
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.step_contexts import AttemptProgress


def recover_lapsed_leases(
    tx: StoreTransaction, flows: dict[str, RegisteredFlow], now: datetime
) -> None:
    """Recover the leases that lapsed by ``now``, of the Flow types this process serves."""
    for row in tx.expired_lease_executions(now):
        _recover_if_served(tx, flows, row, now)


def recover_gone_leases(
    tx: StoreTransaction,
    flows: dict[str, RegisteredFlow],
    owner: str,
    now: datetime,
    gone: Callable[[str], bool],
) -> frozenset[str]:
    """Recover, as if they lapsed now, the leases of other workers whose process ended (``gone``,
    a look at their marks: ``WorkerMarks``); return the owners none of whose leases is left.

    The look runs inside this write transaction: a worker holds its mark before its
    first claim, so a lease committed before this transaction began belongs to a
    process the look sees, and none can be committed until it ends. A lease of a
    Flow type this process does not serve is left to lapse.
    """
    recovered: set[str] = set()
    for other in sorted(tx.lease_owners() - {owner}):
        if not gone(other):
            continue
        served = [_recover_if_served(tx, flows, row, now) for row in tx.leased_executions(other)]
        if all(served):
            recovered.add(other)
    return frozenset(recovered)


def recover_predecessor_leases(
    tx: StoreTransaction, flows: dict[str, RegisteredFlow], owner: str, now: datetime
) -> None:
    """Recover, as if they lapsed now, the leases that bear ``owner``'s ID, for a worker that
    took over the mark of an earlier process of that ID, which ended (``WorkerMark.took_over``).

    Run before the worker claims anything or is handed anything: every such lease is the
    earlier process's. ``recover_gone_leases`` passes over its own owner, so without this
    a restart with a fixed ID waited for those leases to lapse.
    """
    for row in tx.leased_executions(owner):
        _recover_if_served(tx, flows, row, now)


def _recover_if_served(
    tx: StoreTransaction, flows: dict[str, RegisteredFlow], row: ExecutionRow, now: datetime
) -> bool:
    """``recover_lost_lease`` of ``row`` when this process serves its Flow type; whether it did
    (a lease of another type is left to lapse, for a process that serves it)."""
    flow = flows.get(_flow_type(tx, row.flow_id))
    if flow is None:
        return False
    recover_lost_lease(tx, flow, row, now)
    return True


def _flow_type(tx: StoreTransaction, flow_id: str) -> str:
    flow = tx.get_flow(flow_id)
    return "" if flow is None else flow.flow_type


def recover_lost_lease(
    tx: StoreTransaction, flow: RegisteredFlow, row: ExecutionRow, now: datetime
) -> None:
    """Recover the lapsed lease of ``row``, an execution of ``flow``, as of ``now``."""
    # A lease lapses when its worker died or hung. An attempt that never reached
    # the Step's code is handed out again as the same attempt, as Dex does for a
    # task whose stream closed before any output; one that did has failed.
    if row.cancel_requested:
        finish(
            tx, row, ExecutionStatus.CANCELLED, STEP_CANCELLED_EVENT, now, flow.step_history_limit
        )
        return
    if row.wait is None and row.wait_result is None and flow.step(row.step_type).has_wait():
        row.status = ExecutionStatus.PENDING_WAIT
    elif not row.attempt_started:
        options = flow.options(flow.step(row.step_type), row.options)
        budget = options.retry.total_duration
        if budget is not None and row.first_attempt_at and now > row.first_attempt_at + budget:
            fail_execution(
                tx,
                flow,
                row,
                "WorkerLost",
                "no attempt reached a worker in time",
                AttemptProgress.NOT_STARTED,
                now,
            )
            return
        row.status = ExecutionStatus.READY
        tx.release_locks(row.id)
    else:
        fail_execution(
            tx,
            flow,
            row,
            "WorkerLost",
            "the worker running the attempt stopped responding",
            AttemptProgress.NOT_COMPLETED,
            now,
        )
        return
    row.lease_owner = None
    row.lease_expires_at = None
    tx.update_execution(row)


class HandBack(NamedTuple):
    """What ``release_unstarted`` did with a stopping worker's leases."""

    released: int
    """Leases handed back: work that never started."""
    kept: int
    """Leases the worker still holds: started attempts, and Steps of Flow types it does not
    serve or whose cancellation was requested."""


def release_unstarted(
    tx: StoreTransaction, flows: dict[str, RegisteredFlow], owner: str, now: datetime
) -> HandBack:
    """Hand back at once the work a stopping worker holds but never started.

    A wait phase goes back to waiting for a worker, and an execute attempt that sent
    no heartbeat or event is handed out again as the same attempt. A started attempt
    keeps its lease until it lapses, because its effects may have happened.
    """
    released = kept = 0
    for row in tx.leased_executions(owner):
        flow = flows.get(_flow_type(tx, row.flow_id))
        if flow is None or row.attempt_started or row.cancel_requested:
            kept += 1
            continue
        in_wait_phase = (
            row.wait is None and row.wait_result is None and flow.step(row.step_type).has_wait()
        )
        row.status = ExecutionStatus.PENDING_WAIT if in_wait_phase else ExecutionStatus.READY
        row.lease_owner = None
        row.lease_expires_at = None
        tx.update_execution(row)
        tx.release_locks(row.id)
        released += 1
    return HandBack(released, kept)
