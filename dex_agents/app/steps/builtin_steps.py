"""The Steps of the built-in tools ``ask_user`` and ``durable_wait``.

``ask_user`` waits in ``AwaitQuestionAnswer`` (``dex_agents.app.steps.questions``,
shared with tools' own questions); ``durable_wait`` in ``AwaitTimer``.
``write_todos`` needs no Step: it settles in ``RunModel``'s own commit. Invalid
arguments record ``failed`` with ``invalid <tool> arguments: <reason>`` in the
Step's first Execute, which runs at once on a zero Timer. A valid call whose
turn is already steered or cancelled there has not started waiting: it records
``rejected`` with that ``cancellation_reason`` (``turn_control.cancel_before_start``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs

from dex_agents.app import tool_routing, tool_step_movements
from dex_agents.app.session import SessionRuntime
from dex_agents.app.session_events import commit_event
from dex_agents.app.steps import questions, tool_steps, turn_control
from dex_agents.domain.builtin_tools import (
    BuiltInTool,
    durable_wait_output,
    durable_wait_until,
    parse_durable_wait_arguments,
)
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import AgentEventType, TimerStartedPayload
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallCancellation, ToolCallStatus
from dex_agents.domain.tool_outcomes import cancel_unstarted_tool_call
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    dead_end,
    go_to_many,
)
from dex_agents.ports.session_schema import (
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    TOOL_CALL_CANCELLATIONS,
)
from dex_agents.ports.step_contexts import StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Wait, timer


class UnsupportedBuiltInToolError(ValueError):
    """A built-in tool that has no Step of its own (``write_todos`` settles in ``RunModel``)."""


def movement_for(runtime: SessionRuntime, record: AgentToolCall, tool: BuiltInTool) -> StepMovement:
    """The Step a built-in call waits in: ``AwaitQuestionAnswer`` or ``AwaitTimer``.

    Each loads only the call's own record; their first Execute checks the
    arguments and records ``failed`` at once when they are invalid.
    """
    if tool is BuiltInTool.ASK_USER:
        return questions.question_movement(record)
    if tool is BuiltInTool.DURABLE_WAIT:
        return timer_movement(record)
    raise UnsupportedBuiltInToolError(
        f"the built-in tool {tool.value} has no Step: it settles in RunModel's own commit"
    )


def _is_waiting_for_timer(record: AgentToolCall) -> bool:
    return record.status is ToolCallStatus.WAITING_FOR_TIMER and record.wait_until is not None


def timer_movement(record: AgentToolCall) -> StepMovement:
    """The movement to ``AwaitTimer`` for a ``durable_wait`` call, loading only its own record.

    Until the wait has started, Execute locks ``PendingInterrupts`` as
    ``ResumeTurn`` does, so a steer wake either sees the started wait and wakes
    it, or runs first and leaves the call to the Step's own check. The started
    wait's Timer Execute locks nothing.
    """
    own = (tool_step_movements.own_record_load(record.tool_call_id),)
    locks = () if _is_waiting_for_timer(record) else (AttributeLock(PENDING_INTERRUPTS),)
    options = StepOptions(
        loads=own, wait_loads=own, locks=locks, failure_step=tool_steps.RecordToolFailure
    )
    return StepMovement(AwaitTimer, record.tool_call_id, options)


def _waited_seconds(record: AgentToolCall) -> int:
    # The arguments passed the session's limit when the wait started; a limit
    # lowered since must not fail a wait that already ran.
    arguments = parse_durable_wait_arguments(record.arguments, max_durable_wait=timedelta.max)
    return arguments.duration_seconds


class AwaitTimer(Step[str]):
    """Starts a ``durable_wait`` call's wait, then waits on a Timer until ``wait_until``.

    No model call, coroutine or Worker holds the wait. The Timer records
    ``succeeded`` with ``durable_wait_output``; a ``ToolCallCancellations``
    message first records the call ``rejected`` with its reason.
    """

    input_type = str

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        whole = (MapLoad(AGENT_TOOL_CALLS),)
        return StepOptions(loads=whole, wait_loads=whole)

    async def wait_for(self, context: WaitContext, input: str) -> Wait:
        record = context.state.get_instance(AGENT_TOOL_CALLS, input)
        if record is None or record.is_final:
            return Wait.skip()
        cancellation = ChannelCondition(TOOL_CALL_CANCELLATIONS, 1, input)
        if not _is_waiting_for_timer(record) or record.wait_until is None:
            return Wait.any_of(cancellation, timer(timedelta(0)))
        return Wait.any_of(
            cancellation, timer(tool_steps.timer_until(context.now, record.wait_until))
        )

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        record = context.state.get_instance(AGENT_TOOL_CALLS, input)
        if record is None or record.is_final:
            return dead_end()
        runtime = self.runtime
        result = context.wait_result
        cancellation = result.messages[0] if result.messages else None
        if isinstance(cancellation, ToolCallCancellation) and not (
            turn_control.is_stale_cancellation(context.state, record)
        ):
            cancelled = cancel_unstarted_tool_call(record, cancellation.reason)
            tool_routing.finish_record(context, runtime, cancelled)
            return dead_end()
        # A stale cancellation is ignored: the wait starts, or goes on, as if it never came.
        if not _is_waiting_for_timer(record) or record.wait_until is None:
            return self._start(context, record)
        if context.now < record.wait_until:
            return go_to_many(timer_movement(record))  # a Timer that fired early waits again
        done = attrs.evolve(
            record,
            status=ToolCallStatus.SUCCEEDED,
            output=durable_wait_output(_waited_seconds(record), record.wait_reason or ""),
        )
        tool_routing.finish_record(context, runtime, done)
        return dead_end()

    def _start(self, context: StepContext, record: AgentToolCall) -> StepDecision:
        runtime = self.runtime
        try:
            arguments = parse_durable_wait_arguments(
                record.arguments, max_durable_wait=runtime.options.max_durable_wait
            )
        except ToolExecutionError as error:
            failed = attrs.evolve(record, status=ToolCallStatus.FAILED, error=str(error))
            tool_routing.finish_record(context, runtime, failed)
            return dead_end()
        # Invalid arguments fail at once, even in a steered turn; a valid wait
        # that has not started yet is cancelled here rather than started.
        cancelled = turn_control.cancel_before_start(context, runtime, record)
        if cancelled is not None:
            return cancelled
        waiting = attrs.evolve(
            record,
            status=ToolCallStatus.WAITING_FOR_TIMER,
            wait_until=durable_wait_until(context.now, arguments.duration_seconds),
            wait_reason=arguments.reason,
        )
        context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, waiting)
        assert waiting.wait_until is not None
        commit_event(
            context,
            runtime.stream,
            record.turn_id,
            AgentEventType.TIMER_STARTED,
            TimerStartedPayload(
                tool_call_id=record.tool_call_id,
                wait_until=waiting.wait_until,
                reason=arguments.reason,
            ),
        )
        return go_to_many(timer_movement(waiting))


def steps(runtime: SessionRuntime) -> list[Step[Any]]:
    """The built-in tools' Steps: ``AwaitQuestionAnswer`` (shared with tool questions) and ``AwaitTimer``."""
    return [questions.AwaitQuestionAnswer(runtime), AwaitTimer(runtime)]
