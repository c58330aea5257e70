"""The embedded engine's rules, each one store transaction: start, wait, claim, commit, stop.

These functions run inside ``FlowStore.run`` and do only store reads and writes;
``LocalEngine`` runs them on its event loop's thread or, when they would wait for
a lock, on its store thread, and the worker runs the Step code between them,
outside any transaction. Every function that acts for a
claimed attempt first checks that the attempt still holds its lease (fencing),
so a worker that lost its lease can never commit over the attempt that replaced it.
Where a failed attempt goes is ``failure_routing.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from dex_agents.adapters.local import status_members
from dex_agents.adapters.local.codec import (
    condition_fire_at,
    decode_wait,
    encode_options,
    encode_recovery,
    encode_wait,
    encode_wait_result,
)
from dex_agents.adapters.local.history_retention import (
    hand_back_taken,
    prune_if_due,
    retire_finished,
)
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.staged_state import StagedState
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import StepDecision, StepMovement
from dex_agents.ports.errors import FlowAlreadyStartedError
from dex_agents.ports.flow_client import (
    EXECUTE_COMPLETED_EVENT,
    STEP_CANCELLED_EVENT,
)
from dex_agents.ports.flow_rows import (
    ACTIVE_EXECUTION_STATUSES,
    ExecutionRow,
    ExecutionStatus,
    FlowRow,
    FlowStatus,
)
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.step_contexts import RecoveryError
from dex_agents.ports.step_waits import Wait


def start_flow(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    flow_id: str,
    input_json: str,
    initial_values: Sequence[tuple[str, str]],
    now: datetime,
) -> str:
    """Create a Flow run and its start Step execution; return the run ID."""
    if tx.get_flow(flow_id) is not None:
        raise FlowAlreadyStartedError(f"a session with ID {flow_id!r} was already started")
    run_id = str(uuid.uuid4())
    tx.insert_flow(
        FlowRow(
            flow_id=flow_id,
            flow_type=flow.flow_type,
            run_id=run_id,
            status=FlowStatus.RUNNING,
            input=input_json,
            created_at=now,
        )
    )
    for name, value in initial_values:
        tx.put_value(flow_id, name, "", value)
    start = flow.flow.start_step
    if start is not None:
        create_execution(tx, flow, flow_id, StepMovement(type(start), None), "", now, input_json)
    return run_id


def create_execution(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    flow_id: str,
    movement: StepMovement,
    from_step_execution_id: str,
    now: datetime,
    input_json: str | None = None,
    recovery: RecoveryError | None = None,
) -> ExecutionRow:
    """Add one Step execution for a movement."""
    step = flow.step_of(movement.step)
    number = tx.next_step_number(flow_id, step.step_type)
    row = ExecutionRow(
        flow_id=flow_id,
        step_type=step.step_type,
        step_execution_id=f"{step.step_type}-{number}",
        input=to_json(movement.input) if input_json is None else input_json,
        status=status_members.PENDING_WAIT if step.has_wait() else status_members.READY,
        created_at=now,
        options=None if movement.options is None else encode_options(movement.options),
        from_step_execution_id=from_step_execution_id,
        recovery=None if recovery is None else encode_recovery(recovery),
    )
    tx.insert_execution(row)
    return row


def holds_lease(tx: StoreTransaction, claimed: ExecutionRow) -> ExecutionRow | None:
    """The current row if the claimed attempt still holds its lease, else ``None``."""
    row = tx.get_execution(claimed.id)
    if (
        row is None
        or row.status is not status_members.RUNNING
        or row.lease_owner != claimed.lease_owner
        or row.attempt != claimed.attempt
    ):
        return None
    return row


def submit_wait(
    tx: StoreTransaction,
    claimed: ExecutionRow,
    wait: Wait,
    now: datetime,
    history_limit: int | None,
) -> None:
    """Store a wait phase's conditions and satisfy them at once if they are ready."""
    row = end_wait_phase(tx, claimed, now, history_limit)
    if row is not None:
        store_wait(tx, row, wait, now)


def end_wait_phase(
    tx: StoreTransaction, claimed: ExecutionRow, now: datetime, history_limit: int | None
) -> ExecutionRow | None:
    """The row of a wait phase that ended, its lease released, for the caller to store.

    ``None`` when the attempt lost its lease, or when its cancellation was
    requested: that execution is finished ``cancelled`` here.
    """
    row = holds_lease(tx, claimed)
    if row is None:
        return None
    if row.cancel_requested:
        # Cancelled (a stopped Flow, or cancel_turn) while its wait phase ran: it never waits.
        finish(tx, row, ExecutionStatus.CANCELLED, STEP_CANCELLED_EVENT, now, history_limit)
        return None
    row.lease_owner = None
    row.lease_expires_at = None
    return row


def store_wait(tx: StoreTransaction, row: ExecutionRow, wait: Wait, now: datetime) -> None:
    """Store an execution's decided wait and satisfy it at once if it is ready."""
    if not wait.conditions:
        row.status = status_members.READY
        row.wait_result = encode_wait_result(None, False)
        tx.update_execution(row)
        return
    row.wait, row.timer_at = encode_wait(wait, now)
    row.wait_started_at = now
    row.status = status_members.WAITING
    tx.update_execution(row)
    satisfy_wait(tx, row, now)


def satisfy_wait(tx: StoreTransaction, row: ExecutionRow, now: datetime) -> bool:
    """End a waiting execution's wait if a condition is ready: Timers first, then Channels in order."""
    if row.status is not status_members.WAITING or row.wait is None:
        return False
    conditions = decode_wait(row.wait)
    for index, condition in enumerate(conditions):
        fire_at = condition_fire_at(condition)
        if fire_at is not None and fire_at <= now:
            _end_wait(tx, row, encode_wait_result(index, True))
            return True
    for index, condition in enumerate(conditions):
        if condition_fire_at(condition) is not None:
            continue
        channel, key, count = condition["channel"], condition["key"] or "", condition["count"]
        pending = tx.pending_messages(row.flow_id, channel, key)
        if len(pending) >= count:
            taken = list(pending[:count])
            tx.consume_messages([message.seq for message in taken])
            result = encode_wait_result(index, False, channel, taken)
            _end_wait(tx, row, result)
            return True
    return False


def _end_wait(tx: StoreTransaction, row: ExecutionRow, result: str) -> None:
    row.status = status_members.READY
    row.wait_result = result
    row.timer_at = None
    tx.update_execution(row)


def match_waiting(tx: StoreTransaction, flow_id: str, now: datetime) -> None:
    """Offer a Flow run's waiting executions the messages it has now, oldest wait first."""
    for row in tx.flow_executions(flow_id, [status_members.WAITING]):
        satisfy_wait(tx, row, now)


def apply_staged(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    flow_id: str,
    staged: StagedState,
    source: str,
    now: datetime,
) -> None:
    """Write a transaction's staged values, deletions, publishes and events."""
    if staged.writes:
        tx.write_values(flow_id, staged.writes)
    for message_id in staged.deleted_messages:
        tx.delete_message(flow_id, message_id)
    for publish in staged.publishes:
        tx.append_message(
            flow_id, publish.channel, publish.key, str(uuid.uuid4()), publish.value, now
        )
    stream = flow.flow.stream
    if staged.events and stream is not None:
        for _, value in staged.events:
            tx.append_event(flow.flow_type, flow_id, value, source, now)
        tx.trim_events(flow.flow_type, stream.capacity_bytes)


def apply_decision(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    flow_id: str,
    decision: StepDecision,
    from_step_execution_id: str,
    now: datetime,
    except_id: int = 0,
) -> None:
    """Cancel the decision's Step types, then start its movements or close the Flow."""
    limit = flow.step_history_limit
    cancel_steps(
        tx, flow_id, [s.step_type for s in decision.canceling_steps], now, limit, except_id
    )
    if decision.kind is status_members.GO:
        for movement in decision.movements:
            create_execution(tx, flow, flow_id, movement, from_step_execution_id, now)
    elif decision.kind in (status_members.COMPLETE, status_members.FAIL):
        row = tx.get_flow(flow_id)
        if row is not None:
            completed = decision.kind is status_members.COMPLETE
            row.status = status_members.FLOW_COMPLETED if completed else status_members.FLOW_FAILED
            row.closed_at = now
            row.output = to_json(decision.output) if completed else None
            row.failure_reason = decision.reason
            tx.update_flow(row)
        cancel_steps(tx, flow_id, None, now, limit, except_id)


def cancel_steps(
    tx: StoreTransaction,
    flow_id: str,
    step_types: Sequence[str] | None,
    now: datetime,
    history_limit: int | None,
    except_id: int = 0,
) -> None:
    """Cancel active executions (of these types, or all): waits end now, running ones are asked to stop."""
    if step_types is not None and not step_types:
        return
    for row in tx.flow_executions(flow_id, list(ACTIVE_EXECUTION_STATUSES)):
        if row.id == except_id or (step_types is not None and row.step_type not in step_types):
            continue
        if row.status is status_members.RUNNING:
            row.cancel_requested = True
        else:
            finish(tx, row, ExecutionStatus.CANCELLED, STEP_CANCELLED_EVENT, now, history_limit)
            continue
        tx.update_execution(row)


def finish(
    tx: StoreTransaction,
    row: ExecutionRow,
    status: ExecutionStatus,
    event: str,
    now: datetime,
    history_limit: int | None,
) -> None:
    """Make an execution final, release what it held, and run the history check when due.

    A cancelled execution also hands back the Channel messages its wait took:
    it never acted on them (consuming commits with the execute phase, as in
    Dex), so an answer that committed before ``cancel_turn`` still waits for
    the Step that ``FinishTurnCancellation`` sends the call back to.
    """
    if status is status_members.CANCELLED:
        hand_back_taken(tx, row)
    row.status = status
    row.final_event = event
    row.finished_at = now
    row.lease_owner = None
    row.lease_expires_at = None
    row.timer_at = None
    row.not_before = None
    tx.update_execution(row)
    tx.release_locks(row.id)
    prune_if_due(tx, row, history_limit)


def commit_execute(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    claimed: ExecutionRow,
    staged: StagedState,
    decision: StepDecision,
    now: datetime,
) -> bool:
    """Commit a successful execute attempt atomically; ``False`` (nothing written) if its lease is lost."""
    row = holds_lease(tx, claimed)
    if row is None:
        return False
    flow_row = tx.get_flow(row.flow_id)
    limit = flow.step_history_limit
    if (
        flow_row is None
        or flow_row.status is not status_members.FLOW_RUNNING
        or row.cancel_requested
    ):
        finish(tx, row, status_members.CANCELLED, STEP_CANCELLED_EVENT, now, limit)
        return True
    apply_staged(tx, flow, row.flow_id, staged, f"#{row.step_execution_id}", now)
    finish(tx, row, status_members.COMPLETED, EXECUTE_COMPLETED_EVENT, now, limit)
    retire_finished(tx, row)
    apply_decision(tx, flow, row.flow_id, decision, row.step_execution_id, now, row.id)
    match_waiting(tx, row.flow_id, now)
    return True


def stop_flow(
    tx: StoreTransaction, flow_id: str, reason: str | None, now: datetime, history_limit: int | None
) -> bool:
    """Stop a running Flow run and cancel its Steps; ``False`` when it was not running."""
    row = tx.get_flow(flow_id)
    if row is None or row.status is not FlowStatus.RUNNING:
        return False
    row.status = FlowStatus.STOPPED
    row.closed_at = now
    row.failure_reason = reason
    tx.update_flow(row)
    cancel_steps(tx, flow_id, None, now, history_limit)
    return True
