"""One claimed Step execution run by a worker: its wait phase or one execute attempt.

The attempt runs outside any store transaction and commits its result in one,
through the worker that claimed it (``AttemptHost``): a wait phase submits its
``Wait``, an execute attempt its ``StepDecision`` or its failure, each as a
hand-off that may start what the commit made runnable. A cancelled attempt
records why it stopped: a heartbeat that never came fails it, a cancellation
the Flow asked for ends it cancelled, and a stopping worker leaves it to its
lease.
"""

from __future__ import annotations

import asyncio
import traceback
from datetime import timedelta

from dex_agents.adapters.local import claims, handoff
from dex_agents.adapters.local.execute_timeout import ExecuteTimeout
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.running_attempts import AttemptHost, RunningAttempt, claimed_state
from dex_agents.adapters.local.sqlite_store import StoreError
from dex_agents.adapters.local.staged_state import (
    StagedState,
)
from dex_agents.adapters.local.state_sources import (
    SnapshotSource,
)
from dex_agents.adapters.local.step_context import (
    LeaseLostError,
    LocalStepContext,
    LocalWaitContext,
)
from dex_agents.adapters.local.store_errors import UnreadableStateError
from dex_agents.ports.engine import ENGINE_LOGGER as logger
from dex_agents.ports.engine import StepDecision
from dex_agents.ports.errors import RetryAfterError
from dex_agents.ports.flow_rows import ExecutionRow
from dex_agents.ports.step_contexts import AttemptResult, ResultDropReason
from dex_agents.ports.step_waits import Wait

COMMITTED = AttemptResult()
LEASE_LOST = AttemptResult(
    dropped=ResultDropReason.LEASE_LOST,
    error_type=LeaseLostError.__name__,
    detail="the worker lost the attempt's lease before its commit; another worker runs it",
)


def _settled(committed: bool) -> AttemptResult:
    return COMMITTED if committed else LEASE_LOST


def _always(_: object) -> bool:
    return True


class StepTimeoutError(TimeoutError):
    """An execute attempt ran longer than its ``execute_timeout``."""


class HeartbeatTimeoutError(TimeoutError):
    """A started attempt sent no heartbeat within its ``heartbeat_timeout``."""


async def run_wait(host: AttemptHost, running: RunningAttempt) -> None:
    """Run the wait phase and submit its ``Wait``; one that raises runs again later."""
    engine, flow, row = host.engine, running.flow, running.row
    step = flow.step(row.step_type)
    try:
        options = flow.options(step, row.options)
        snapshot = await claimed_state(host, running, options.wait_loads)
        state = StagedState(row.flow_id, SnapshotSource(snapshot), options.wait_loads)
        wait = await step.wait_for(
            LocalWaitContext(row, state, engine.now()), flow.decode_input(step, row.input)
        )
        if not isinstance(wait, Wait):
            raise TypeError(f"{row.step_type}.wait_for returned {type(wait).__name__}, not Wait")
    except asyncio.CancelledError:
        if running.cancel_requested:
            # Ended now, as a cancelled execute attempt is: until 2026-12-07 it recorded
            # nothing and stayed leased, running, until its lease lapsed.
            await host.transact(
                lambda tx: claims.cancelled_while_running(
                    tx, row, engine.now(), flow.step_history_limit
                )
            )
        raise
    except Exception as error:
        retry = host.wait_failures.failed(row.id, error)
        if retry.loud:
            # Once per execution (and failure) per worker: the cause stays in the log without
            # a traceback a second for as long as the Step is active.
            logger.exception(
                "wait phase of %s failed; it runs again, less often while it keeps failing"
                " (logged once)",
                row.step_execution_id,
            )
        else:
            logger.debug(
                "wait phase of %s failed again (%d in a row); it runs again in %s: %s",
                row.step_execution_id,
                retry.failures,
                retry.delay,
                "".join(traceback.format_exception_only(error)).strip(),
            )
        await host.transact(
            lambda tx: claims.retry_wait_phase(
                tx, row, engine.now(), retry.delay, flow.step_history_limit
            ),
            durable=False,
        )
        return
    host.wait_failures.succeeded(row.id)
    await host.handing_off(
        lambda tx, limit: handoff.submit_wait(
            tx, flow, row, wait, engine.now(), engine.lease_duration, limit
        ),
    )


async def run_execute(host: AttemptHost, running: RunningAttempt) -> None:
    """Run one execute attempt and commit its decision, or its failure for the retry policy."""
    engine, flow, row = host.engine, running.flow, running.row
    step = flow.step(row.step_type)
    options = running.options or flow.options(step, row.options)
    # The claim read the state and the run ID (the spans' dex.run.id) with the lease.
    try:
        snapshot = await claimed_state(host, running, options.loads)
    except asyncio.CancelledError:
        # A state read again (the claim could not read it) that a cancellation stops ends
        # cancelled too: until 2026-12-07 it recorded nothing and stayed leased until the
        # lease lapsed.
        await after_cancel(host, running)
        raise
    except UnreadableStateError as error:
        # As a Step that raised: its retry policy and failure route decide, and no slot
        # is held meanwhile. Nothing stored changes, so a repaired file can go on.
        logger.error("attempt %d of %s failed: %s", row.attempt, row.step_execution_id, error)
        await fail_attempt(host, flow, row, type(error).__name__, str(error))
        return
    state = StagedState(row.flow_id, SnapshotSource(snapshot), options.loads)

    # A heartbeat or an event flush changes only its own attempt's row and the Stream:
    # nothing becomes runnable, so the claim loop need not look after either.
    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        held = await engine.run_quietly(
            lambda tx: claims.record_heartbeat(
                tx, flow, row, checkpoint, checkpoint is None, events, engine.now()
            ),
            durable=durable,
            quiet=_always,
        )
        if not held:
            # The heartbeat raises LeaseLostError in the task that sent it; when that is
            # not the attempt's (a background heartbeat), the attempt stops too.
            host.stop_lost_run(running)
        return held

    async def flush(events: list[str]) -> bool:
        # Live events show progress; the attempt's commit holds its result.
        held = await engine.run_quietly(
            lambda tx: claims.append_events(tx, flow, row, events, engine.now()),
            durable=False,
            quiet=_always,
        )
        if not held:
            # Found within the flush interval while a model streams: stopped now, the
            # call does not run on to its next heartbeat, paid for a result its commit drops.
            host.stop_lost_run(running)
        return held and flow.flow.stream is not None  # written: the attempt started

    context = LocalStepContext(
        flow,
        row,
        state,
        engine.now(),
        beat=beat,
        flush=flush,
        flush_interval=host.event_flush_interval,
        run_id=running.run_id,
        clock=engine.now,
        reports_result=True,
    )
    running.context = context
    try:
        async with ExecuteTimeout(context, options.execute_timeout):
            decision = await step.execute(context, flow.decode_input(step, row.input))
        if not isinstance(decision, StepDecision):
            raise TypeError(
                f"{row.step_type}.execute returned {type(decision).__name__}, not StepDecision"
            )
    except asyncio.CancelledError as stop:
        lost = stop if isinstance(stop, LeaseLostError) else running.stop_reason
        if isinstance(lost, LeaseLostError):
            logger.warning("%s; this worker's run of it stopped", lost)
        await after_cancel(host, running)
        raise
    except Exception as error:  # a failed attempt: the retry policy decides
        await _keep_live_events(host, flow, row, context, context.close())
        failure: BaseException = error
        retry_delay = None
        if isinstance(error, RetryAfterError):
            # As Dex's retry_after: the cause is the attempt's error, the delay its wait.
            failure, retry_delay = error.cause, error.delay
        if isinstance(error, TimeoutError) and running.stop_reason is None:
            failure = StepTimeoutError(f"the attempt ran longer than {options.execute_timeout}")
        error_type, detail = type(failure).__name__, str(failure)
        logger.info(
            "attempt %d of %s failed: %s",
            row.attempt,
            row.step_execution_id,
            "".join(traceback.format_exception_only(failure)).strip(),
        )
        context.settle(
            _settled(await fail_attempt(host, flow, row, error_type, detail, retry_delay))
        )
        return
    pending = context.close()
    pending[:0] = await context.wait_closed()
    stream = flow.flow.stream
    if stream is not None and pending:
        state.events[:0] = [(stream, event) for event in pending]
    try:
        committed = await host.handing_off(
            lambda tx, limit: handoff.commit_execute(
                tx, flow, row, state, decision, engine.now(), engine.lease_duration, limit
            ),
        )
    except StoreError:
        raise  # only while stopping: the lease lapses and the attempt is taken over
    except Exception as error:
        # A result the store refuses (a bug, or a value it cannot hold) fails the attempt
        # at once, as what it is, instead of leaving it to wait out its lease.
        logger.exception("the result of %s could not be committed", row.step_execution_id)
        detail = f"the attempt's result could not be committed: {error}"
        context.settle(AttemptResult(ResultDropReason.COMMIT_FAILED, type(error).__name__, detail))
        await fail_attempt(host, flow, row, type(error).__name__, detail)
        return
    if not committed:
        logger.warning("%s lost its lease; its result was dropped", row.step_execution_id)
    # After the commit, not before: what the attempt reports (its spans) must not say a
    # result is in that a worker killed before the commit leaves out (it runs again).
    context.settle(_settled(committed))


async def fail_attempt(
    host: AttemptHost,
    flow: RegisteredFlow,
    row: ExecutionRow,
    error_type: str,
    detail: str,
    retry_delay: timedelta | None = None,
) -> bool:
    """Commit a failed attempt: its retry policy decides whether another runs.

    ``retry_delay`` replaces the policy's interval before the next attempt.
    ``False`` when the worker no longer held the lease, so nothing was recorded.
    """
    engine = host.engine
    return await host.handing_off(
        lambda tx, limit: handoff.fail_attempt(
            tx,
            flow,
            row,
            error_type,
            detail,
            engine.now(),
            engine.lease_duration,
            limit,
            retry_delay,
        ),
    )


async def _keep_live_events(
    host: AttemptHost,
    flow: RegisteredFlow,
    row: ExecutionRow,
    context: LocalStepContext,
    unsent: list[str],
) -> None:
    """Write a failed attempt's live events that ``close`` returned (``unsent``) and those its
    commits on their way give back, which are older."""
    unsent[:0] = await context.wait_closed()
    if unsent:
        # Live events stay even when the attempt fails, as in Dex: a UI keeps
        # only the highest attempt's text, so it needs to see this one's.
        await host.transact(
            lambda tx: claims.append_events(tx, flow, row, unsent, host.engine.now()),
            durable=False,
        )


async def after_cancel(host: AttemptHost, running: RunningAttempt) -> None:
    """Record why a cancelled attempt stopped, unless the worker is stopping."""
    context, row = running.context, running.row
    unsent = [] if context is None else context.close()
    reason = running.stop_reason
    timed_out = isinstance(reason, HeartbeatTimeoutError)
    if context is not None and (timed_out or context.cancellation_requested):
        # The engine stopped it: that is its outcome, whether or not the record below
        # lands (a second cancellation, the worker's closing, may interrupt it).
        context.settle(COMMITTED)
    if isinstance(reason, HeartbeatTimeoutError):
        if context is not None:
            # A failed attempt, as one that raised: until 2026-12-07 its stop dropped the
            # live events still waiting for their flush.
            await _keep_live_events(host, running.flow, row, context, unsent)
        await fail_attempt(host, running.flow, row, type(reason).__name__, str(reason))
    elif running.cancel_requested or (context is not None and context.cancellation_requested):
        await host.transact(
            lambda tx: claims.cancelled_while_running(
                tx, row, host.engine.now(), running.flow.step_history_limit
            )
        )
    # Otherwise the worker is stopping: the lease lapses and the attempt is taken over, and
    # its result callbacks never run, as for a worker that died.
