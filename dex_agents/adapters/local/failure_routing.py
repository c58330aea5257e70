"""Failure routing: where a failed attempt goes, under its Step's retry policy.

A failed attempt runs again while its retry policy allows (more attempts left and
the next one's delay within the total duration); past that, the execution fails
and its Step's failure Step starts with a ``RecoveryError``, or, with none, the
Flow fails.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from dex_agents.adapters.local.history_retention import hand_back_taken, retire_finished
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.store_errors import UnreadableStateError
from dex_agents.adapters.local.transitions import (
    apply_decision,
    create_execution,
    finish,
    holds_lease,
)
from dex_agents.ports.engine import DecisionKind, StepDecision, StepMovement, StepOptions
from dex_agents.ports.flow_client import EXECUTE_FAILED_EVENT, STEP_CANCELLED_EVENT
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.step_contexts import AttemptProgress, RecoveryError


def fail_attempt(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    claimed: ExecutionRow,
    error_type: str,
    detail: str,
    now: datetime,
    retry_delay: timedelta | None = None,
) -> None:
    """Record a failed execute attempt: retry it, route it to its failure Step, or fail the Flow.

    ``retry_delay``, asked for by the attempt (``RetryAfterError``), replaces the
    retry policy's interval before the next attempt.
    """
    row = holds_lease(tx, claimed)
    if row is None:
        return
    if row.cancel_requested:
        finish(
            tx, row, ExecutionStatus.CANCELLED, STEP_CANCELLED_EVENT, now, flow.step_history_limit
        )
        return
    fail_execution(
        tx, flow, row, error_type, detail, AttemptProgress.NOT_COMPLETED, now, retry_delay
    )


def failure_movement(flow: RegisteredFlow, options: StepOptions) -> StepMovement:
    """The movement to ``options``' failure route: its own options, holding the
    ``failure_locks`` too when the failing Step's movement names any."""
    assert options.failure_step is not None
    if not options.failure_locks:
        return StepMovement(options.failure_step)
    own = flow.options(flow.step_of(options.failure_step), None)
    locks = own.locks + tuple(lock for lock in options.failure_locks if lock not in own.locks)
    return StepMovement(options.failure_step, options=replace(own, locks=locks))


def fail_execution(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    row: ExecutionRow,
    error_type: str,
    detail: str,
    progress: AttemptProgress,
    now: datetime,
    retry_delay: timedelta | None = None,
) -> None:
    """Record the failure of ``row``'s attempt, whose lease the caller checked or recovered:
    retry it, or finish it ``failed`` and start its failure Step or fail the Flow.

    ``progress`` says how far the attempt got, for the failure Step's ``RecoveryError``.
    ``retry_delay`` replaces the retry policy's interval; the next attempt must
    still start within the policy's total duration.
    """
    step = flow.step(row.step_type)
    options = flow.options(step, row.options)
    retry = options.retry
    next_attempt = row.attempt + 1
    if retry_delay is None:
        delay = retry.delay_before(next_attempt) * flow.retry_interval_scale
    else:
        delay = retry_delay
    started = row.first_attempt_at or now
    retry_at = _after(now, delay)
    deadline = None if retry.total_duration is None else _after(started, retry.total_duration)
    # A wait past the last date a datetime holds (a provider's broken Retry-After) never
    # ends: the attempt takes its failure route now, as past the policy's total duration.
    within_budget = retry_at is not None and (deadline is None or retry_at <= deadline)
    tx.release_locks(row.id)
    if next_attempt <= retry.maximum_attempts and within_budget and retry_at is not None:
        row.status = ExecutionStatus.READY
        row.attempt = next_attempt
        row.attempt_started = False
        row.not_before = retry_at
        row.lease_owner = None
        row.lease_expires_at = None
        tx.update_execution(row)
        return
    finish(tx, row, ExecutionStatus.FAILED, EXECUTE_FAILED_EVENT, now, flow.step_history_limit)
    if error_type == UnreadableStateError.__name__ and options.failure_step is None:
        # Its last attempt never read the state it would act with, and the Flow fails with
        # it: a user's message its wait took stays stored, not lost with it. A failure route
        # acts in its place (settles the call whose approval or answer it took), so there
        # the messages go with it, as on Dex: handed back, the next wait on their Channel
        # and key took them as its own.
        hand_back_taken(tx, row)
    else:
        retire_finished(tx, row)
    recovery = RecoveryError(detail=detail, error_type=error_type, attempt_progress=progress)
    if options.failure_step is not None:
        create_execution(
            tx,
            flow,
            row.flow_id,
            failure_movement(flow, options),
            row.step_execution_id,
            now,
            input_json=row.input,
            recovery=recovery,
        )
        return
    reason = (
        f"Step {row.step_execution_id} failed after {row.attempt} attempts: {error_type}: {detail}"
    )
    apply_decision(
        tx, flow, row.flow_id, StepDecision(DecisionKind.FAIL, reason=reason), "", now, row.id
    )


def _after(moment: datetime, delay: timedelta) -> datetime | None:
    """``moment + delay``, or ``None`` past the last date a ``datetime`` holds."""
    try:
        return moment + delay
    except OverflowError:
        return None
