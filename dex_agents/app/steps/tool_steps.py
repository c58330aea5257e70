"""The tool call Steps: approval, the two tool Steps, and their failure routes.

Each takes the tool call ID as input and loads only its own ``AgentToolCalls``
record, so parallel tool Steps never share state. A record that is already final
ends its Step without running or publishing; every started call publishes exactly
one ``ToolCallResults`` message, when its record becomes final (a queued write that
never started publishes none: ``ResumeTurn`` never waited for it).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TypeVar

import attrs

from dex_agents.app import tool_routing, tool_step_movements, tracing
from dex_agents.app.background_heartbeat import BackgroundHeartbeat
from dex_agents.app.session import SessionRuntime
from dex_agents.app.session_events import (
    SessionEventWriter,
    commit_interrupt_resolved,
)
from dex_agents.domain.builtin_tools import timer_seconds_until
from dex_agents.domain.errors import ToolExecutionError, ToolOutcomeUnknownError
from dex_agents.domain.interrupts import AgentInterruptResolution, InterruptKind, without_interrupt
from dex_agents.domain.runner_outcome_checks import (
    check_deferred_tool_outcome,
)
from dex_agents.domain.runner_outcomes import (
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskStarted,
)
from dex_agents.domain.tool_calls import (
    AgentToolCall,
    CancellationReason,
    ToolCallCancellation,
    ToolCallStatus,
)
from dex_agents.domain.tool_effects import start_mark_may_be_lost
from dex_agents.domain.tool_outcomes import (
    abandon_tool_task,
    cancel_unstarted_tool_call,
    record_missing_tool_task_poller,
    record_tool_error,
    record_tool_failure,
    record_tool_outcome_unknown,
    record_tool_result,
)
from dex_agents.domain.turns import idempotency_key
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    Step,
    StepDecision,
    StepOptions,
    dead_end,
    go_to_many,
)
from dex_agents.ports.runner import DeferredToolExecution
from dex_agents.ports.session_schema import (
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    TOOL_CALL_CANCELLATIONS,
)
from dex_agents.ports.step_contexts import AttemptProgress, StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Condition, Wait, timer

T = TypeVar("T")

APPROVAL_DEADLINE_PASSED = "approval deadline passed"
"""The ``rejection_message`` of an approval whose deadline passed before anyone answered."""


def timer_until(now: datetime, deadline: datetime) -> timedelta:
    """A deadline Timer: the whole seconds until ``deadline``, rounded up."""
    return timedelta(seconds=timer_seconds_until(now, deadline))


def _own_record(context: StepContext, tool_call_id: str) -> AgentToolCall | None:
    return context.state.get_instance(AGENT_TOOL_CALLS, tool_call_id)


async def run_tool(
    context: StepContext,
    runtime: SessionRuntime,
    record: AgentToolCall,
    traced: tracing.ToolAttempt,
    writer: SessionEventWriter,
    call: Callable[[], Awaitable[object]],
    check: Callable[[object], T],
) -> T | None:
    """What ``call`` to the tool (or its task) returned, checked, with heartbeats while it runs.

    ``None`` when it raised ``ToolExecutionError`` or ``ToolOutcomeUnknownError``:
    the model sees those, so the record is staged final with the error, never
    retried. The attempt's events writer is closed either way.
    """
    try:
        async with BackgroundHeartbeat(context):
            return check(await call())
    except (ToolExecutionError, ToolOutcomeUnknownError) as error:
        traced.failed(error)
        tool_routing.finish_record(context, runtime, record_tool_error(record, error))
        return None
    finally:
        writer.close()


class _ToolStep(Step[str]):
    """Runs one approved call through the runner; its effect chose this Step."""

    input_type = str

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        with tracing.tool_attempt(context, self.runtime) as traced:
            return await self._execute(context, input, traced)

    async def _execute(
        self, context: StepContext, input: str, traced: tracing.ToolAttempt
    ) -> StepDecision:
        record = _own_record(context, input)
        if record is None or record.is_final:
            return dead_end()
        # Imported here: tool_routing imports this module (through tool_step_movements),
        # and turn_control (through run_model) takes names from tool_routing, so at module
        # level the import fails with tool_routing partly initialized.
        from dex_agents.app.steps import turn_control

        cancelled = turn_control.cancel_before_start(context, self.runtime, record)
        if cancelled is not None:
            return cancelled
        runtime = self.runtime
        traced.begin(record)
        writer = SessionEventWriter(context, runtime.stream, record.turn_id)
        writer.write_tool_call_started(record.tool_call_id, record.tool_name)
        # A heartbeat before the tool runs marks the attempt started, so a lost
        # worker from here on fails the attempt instead of handing it out again.
        await context.heartbeat(durable=not start_mark_may_be_lost(record.effect))
        execution = DeferredToolExecution(
            flow_id=context.flow_id,
            tool_call=record,
            idempotency_key=idempotency_key(context.flow_id, record.turn_id, record.tool_call_id),
            attempt=context.attempt,
            events=writer,
            heartbeat=context.heartbeat,
            save_heartbeat_checkpoint=context.heartbeat,
            heartbeat_checkpoint=context.last_heartbeat_value,
            input_answers=record.input_answers,
            context=context,
            supports_tool_tasks=runtime.capabilities.tool_task_poller is not None,
        )
        outcome = await run_tool(
            context,
            runtime,
            record,
            traced,
            writer,
            lambda: runtime.runner.execute_deferred_tool_call(execution),
            check_deferred_tool_outcome,
        )
        if outcome is None:
            return dead_end()
        if isinstance(outcome, ToolExecutionResult):
            tool_routing.finish_record(context, runtime, record_tool_result(record, outcome))
        elif isinstance(outcome, ToolTaskStarted) and runtime.capabilities.tool_task_poller is None:
            tool_routing.finish_record(context, runtime, record_missing_tool_task_poller(record))
        else:
            return await self._continue_later(context, record, outcome)
        return dead_end()

    async def _continue_later(
        self,
        context: StepContext,
        record: AgentToolCall,
        outcome: ToolInputRequested | ToolTaskStarted,
    ) -> StepDecision:
        # Questions and tasks hand the call to AwaitQuestionAnswer or PollToolTask.
        from dex_agents.app.steps import tool_tasks

        return tool_tasks.continue_after(context, self.runtime, record, outcome)


class CallTool(_ToolStep):
    """Runs one ``read`` or ``idempotent_write`` call; 3 attempts, failure route ``RecordToolFailure``."""


class CallSingleAttemptTool(_ToolStep):
    """Runs one ``non_idempotent_write`` or ``unclassified`` call; 1 attempt,
    failure route ``RecordToolOutcomeUnknown``."""


def _task_abandoned(context: StepContext, record: AgentToolCall) -> bool:
    from dex_agents.app.steps import tool_tasks  # tool_tasks imports this module

    return tool_tasks.is_turn_cancelled(context.state, record)


class _RecordFailure(Step[str]):
    input_type = str

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(loads=(MapLoad(AGENT_TOOL_CALLS),))

    @abstractmethod
    def record(self, record: AgentToolCall, detail: str, never_started: bool) -> AgentToolCall:
        """The final record this failure route commits for a call whose Step failed."""

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        record = _own_record(context, input)
        if record is None or record.is_final:
            return dead_end()
        error = context.recovery_error
        detail = "the tool Step failed" if error is None else f"{error.error_type}: {error.detail}"
        never_started = error is not None and error.attempt_progress is AttemptProgress.NOT_STARTED
        final = self.record(record, detail, never_started)
        if record.task_id is not None and _task_abandoned(context, record):
            # CancelToolTask's failure route: the abandoned task still records why.
            final = attrs.evolve(abandon_tool_task(record), error=detail)
        tool_routing.finish_record(context, self.runtime, final)
        return dead_end()


class RecordToolFailure(_RecordFailure):
    """Records ``failed`` for a read and ``outcome_unknown`` for a write whose ``CallTool``
    attempts were spent; ``failed`` with ``TOOL_CALL_NOT_RUN_ERROR_PREFIX`` when it never started."""

    def record(self, record: AgentToolCall, detail: str, never_started: bool) -> AgentToolCall:
        return record_tool_failure(record, detail, never_started)


class RecordToolOutcomeUnknown(_RecordFailure):
    """Records ``outcome_unknown`` for a single-attempt call whose attempt failed;
    ``failed`` with ``TOOL_CALL_NOT_RUN_ERROR_PREFIX`` when it never started."""

    def record(self, record: AgentToolCall, detail: str, never_started: bool) -> AgentToolCall:
        return record_tool_outcome_unknown(record, detail, never_started)


class AwaitToolApproval(Step[str]):
    """Waits for the approval of a call, or its deadline; then runs or rejects it."""

    input_type = str

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(locks=(AttributeLock(PENDING_INTERRUPTS),))

    async def wait_for(self, context: WaitContext, input: str) -> Wait:
        conditions: list[Condition] = [
            ChannelCondition(TOOL_CALL_CANCELLATIONS, 1, input),
            ChannelCondition(INTERRUPT_RESOLUTIONS, 1, input),
        ]
        pending = context.state.get(PENDING_INTERRUPTS) or ()
        interrupt = next((item for item in pending if item.interrupt_id == input), None)
        if interrupt is not None and interrupt.deadline is not None:
            conditions.append(timer(timer_until(context.now, interrupt.deadline)))
        return Wait.any_of(*conditions)

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        record = _own_record(context, input)
        if record is None or record.is_final:
            return dead_end()
        result = context.wait_result
        runtime = self.runtime
        state = context.state
        pending = state.get(PENDING_INTERRUPTS) or ()
        if result.timer_fired:
            interrupt = next((item for item in pending if item.interrupt_id == input), None)
            if interrupt is None or (
                interrupt.deadline is not None and context.now < interrupt.deadline
            ):
                # A Timer that fires before the deadline waits again; so does one that
                # fires just as resolve_interrupt removed the interrupt, whose answer is
                # then waiting on InterruptResolutions.
                return go_to_many(tool_step_movements.approval_movement(record))
            state.set(PENDING_INTERRUPTS, without_interrupt(pending, input))
            tracing.start_activation(
                context,
                runtime,
                turn_id=record.turn_id,
                trigger="interrupt_deadline",
                interrupt_id=input,
                approved=False,
            )
            self._resolved(context, record, approved=False, rejection=APPROVAL_DEADLINE_PASSED)
            rejected = attrs.evolve(
                record, status=ToolCallStatus.REJECTED, rejection_message=APPROVAL_DEADLINE_PASSED
            )
            tool_routing.finish_record(context, runtime, rejected)
            return dead_end()
        (resolution,) = result.messages
        if isinstance(resolution, ToolCallCancellation):
            from dex_agents.app.steps import turn_control  # an import cycle, see _execute

            if turn_control.is_stale_cancellation(state, record):
                return go_to_many(tool_step_movements.approval_movement(record))
            state.set(PENDING_INTERRUPTS, without_interrupt(pending, input))
            self._resolved(
                context, record, approved=False, rejection=None, reason=resolution.reason
            )
            tool_routing.finish_record(
                context, runtime, cancel_unstarted_tool_call(record, resolution.reason)
            )
            return dead_end()
        assert isinstance(resolution, AgentInterruptResolution)
        root = tracing.start_activation(
            context,
            runtime,
            turn_id=record.turn_id,
            trigger="interrupt_resolution",
            interrupt_id=input,
            approved=resolution.approved,
        )
        self._resolved(
            context, record, approved=resolution.approved, rejection=resolution.rejection_message
        )
        if resolution.approved:
            # The approval's root parents the call's spans, not the deferring one's.
            approved = attrs.evolve(record, status=ToolCallStatus.APPROVED, trace_context=root)
            state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, approved)
            return go_to_many(tool_step_movements.tool_step_movement(runtime, approved))
        rejected = attrs.evolve(
            record, status=ToolCallStatus.REJECTED, rejection_message=resolution.rejection_message
        )
        tool_routing.finish_record(context, runtime, rejected)
        return dead_end()

    def _resolved(
        self,
        context: StepContext,
        record: AgentToolCall,
        *,
        approved: bool,
        rejection: str | None,
        reason: CancellationReason | None = None,
    ) -> None:
        commit_interrupt_resolved(
            context,
            self.runtime.stream,
            record.turn_id,
            record.tool_call_id,
            InterruptKind.APPROVAL,
            approved=approved,
            rejection=rejection,
            reason=reason,
        )
