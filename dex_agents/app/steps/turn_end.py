"""``ResumeTurn`` and ``RecordTurnFailure``: where a turn goes after its tool calls, or after it failed."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import attrs

from dex_agents.app import tool_routing, tracing
from dex_agents.app.message_store import CHUNKS_LOAD, WINDOW_LOAD
from dex_agents.app.session import (
    SessionRuntime,
    build_user_message,
    end_turn,
    require_state,
    store_turn_messages,
    turn_records,
)
from dex_agents.app.session_events import SessionEventWriter
from dex_agents.app.steps import run_model, start, turn_control
from dex_agents.domain.images import validate_image_references
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import FrameworkMessage
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.domain.tool_calls import (
    CancellationReason,
    ToolCallCancellation,
    ToolCallStatus,
)
from dex_agents.domain.tool_outcomes import build_turn_failure_note, cancel_unstarted_tool_call
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    Step,
    StepDecision,
    StepDurability,
    StepOptions,
    go_to,
)
from dex_agents.ports.errors import ModelCallError, RetryAfterError, checked_retry_after
from dex_agents.ports.session_schema import (
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    TOOL_CALL_CANCELLATIONS,
    TOOL_CALL_RESULTS,
    TURN_CONTROL_REQUESTS,
)
from dex_agents.ports.step_contexts import StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Wait

logger = logging.getLogger("dex_agents.session")


class ResumeTurn(Step[int]):
    """Waits for one ``ToolCallResults`` message per tool call, or a steer wake; then calls the
    model again, or moves to ``ApplyTurnControl`` when the turn is steered or cancelled."""

    input_type = int
    # Deciding where the turn goes reads and stages state only.
    state_only = True

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(
            loads=(MapLoad(AGENT_TOOL_CALLS),),
            locks=(AttributeLock(PENDING_INTERRUPTS),),
            durability=StepDurability.SYNC,
        )

    async def wait_for(self, context: WaitContext, input: int) -> Wait:
        # Every wake waiting now is consumed at once: one pass cancels all waits.
        wakes = context.state.channel_size(TURN_CONTROL_REQUESTS)
        return Wait.any_of(
            ChannelCondition(TOOL_CALL_RESULTS, max(input, 1)),
            ChannelCondition(TURN_CONTROL_REQUESTS, max(wakes, 1)),
        )

    async def execute(self, context: StepContext, input: int) -> StepDecision:
        state = context.state
        agent_state = require_state(state)
        if context.wait_result.condition_index == 1:
            # A steer wake consumed no result, so the same count is still expected.
            cancel_steered_waits(context, self.runtime, agent_state)
            return go_to(ResumeTurn, input)
        # A queued write waits for RunModel, not for a result: it starts no Step until then.
        unfinished = [r for r in turn_records(state).values() if not (r.is_final or r.write_queued)]
        if unfinished:
            # A consumed result left a record of the turn unfinished: wait for the rest.
            return go_to(ResumeTurn, len(unfinished))
        if turn_control.turn_control_reason(state, agent_state) is not None:
            return go_to(turn_control.ApplyTurnControl)
        state.set(AGENT_STATE, attrs.evolve(agent_state, status=AgentStatus.RUNNING_MODEL))
        return run_model.go_to_run_model(state, self.runtime)


def cancel_steered_waits(
    context: StepContext, runtime: SessionRuntime, agent_state: AgentState
) -> None:
    """``ResumeTurn``'s steer wake: cancel what the steered turn still waits for.

    Removes the pending interrupts of the turn's approvals and of questions no
    task asked, and wakes each such approval, question and started durable wait
    through ``ToolCallCancellations`` (reason ``steered``); the waiting Step
    records the call. Queued writes, which no Step waits in, record ``rejected``
    here. A wait whose deadline or Timer is already due is left to its own Step,
    and so is a question not raised yet or a durable wait not started yet: their
    Step checks the turn before it starts waiting (``cancel_before_start``) and
    locks ``PendingInterrupts`` until then, as this Step does, so it never starts
    a wait this pass missed. A message can outlive its wait when ``cancel_turn``
    ends the wait before it takes it; a later turn's call that reuses the tool
    call ID takes it as stale (``turn_control.is_stale_cancellation``) and waits
    normally.
    """
    state = context.state
    reason = turn_control.turn_control_reason(state, agent_state)
    if reason is not CancellationReason.STEERED:
        return
    now = context.now
    records = turn_records(state)
    woken: set[str] = set()
    for record in records.values():
        if record.is_final or record.task_id is not None:
            continue
        if record.write_queued:
            cancelled = cancel_unstarted_tool_call(record, reason)
            tool_routing.finish_queued_write(context, runtime, cancelled)
        elif (
            record.status is ToolCallStatus.WAITING_FOR_TIMER
            and record.wait_until is not None
            and now < record.wait_until
        ):
            woken.add(record.tool_call_id)
    pending = state.get(PENDING_INTERRUPTS) or ()
    kept: list[AgentInterrupt] = []
    for interrupt in pending:
        asking = records.get(interrupt.tool_call_id)
        cancellable = (
            asking is not None
            and not asking.is_final
            and not asking.write_queued
            and asking.task_id is None  # steering never cancels a task's question
            and interrupt.turn_id == agent_state.active_turn_id
            and (interrupt.deadline is None or now < interrupt.deadline)
        )
        if cancellable:
            woken.add(interrupt.tool_call_id)
        else:
            kept.append(interrupt)
    if len(kept) != len(pending):
        state.set(PENDING_INTERRUPTS, tuple(kept))
    for tool_call_id in sorted(woken):
        cancellation = ToolCallCancellation(tool_call_id=tool_call_id, reason=reason)
        state.publish_to(TOOL_CALL_CANCELLATIONS, tool_call_id, cancellation)


def unfinished_turn_messages(
    context: StepContext, runtime: SessionRuntime, agent_state: AgentState
) -> list[FrameworkMessage] | None:
    """The runner's ``build_unfinished_turn_messages`` for the active turn, checked.

    ``None`` when the runner does not implement it, or when it raised or returned
    anything but valid ``FrameworkMessage`` values (a warning is logged), so the
    caller stores only its note.
    """
    runner = runtime.capabilities.unfinished_turn_messages
    if runner is None:
        return None
    writer = SessionEventWriter(context, runtime.stream, agent_state.active_turn_id)
    try:
        turn = run_model.build_turn_context(context, runtime, agent_state, writer)
        built = list(runner.build_unfinished_turn_messages(turn))
        if not all(isinstance(message, FrameworkMessage) for message in built):
            raise TypeError("build_unfinished_turn_messages must return FrameworkMessage values")
        for message in built:
            validate_image_references(message.images)
        return built
    except Exception:
        logger.warning(
            "build_unfinished_turn_messages failed; only the turn's note is stored",
            exc_info=True,
        )
        return None
    finally:
        writer.close()


def turn_failure_text(error: BaseException) -> str:
    """The ``last_turn_error`` of a turn that a model call ended: the error's own text."""
    return str(error) or type(error).__name__


def model_call_failed(error: ModelCallError, chat: tracing.ModelAttempt) -> StepDecision:
    """Where a Step goes after its model call raised ``error``: ``RecordTurnFailure``.

    A retryable error is raised again instead, for the Step's retry policy (its
    failure route ends the turn once the retries run out); one whose provider
    asked for a wait (``retry_after``) as a ``RetryAfterError``, so the next
    attempt waits that long instead of the policy's interval.
    """
    if error.retryable:
        # A subclass's class attribute passes by the setter's check.
        delay = checked_retry_after(error.retry_after, error)
        if delay is not None and delay > timedelta(0):
            raise RetryAfterError(delay, error) from error
        raise error
    chat.failed(error)
    return go_to(RecordTurnFailure, turn_failure_text(error))


class RecordTurnFailure(Step[Any]):
    """The failure route of ``RunModel`` and ``CompactContext``: the turn ends as failed.

    ``RunModel`` and ``CompactContext`` also move here directly, with the error's
    text as input, when a model call fails with a ``ModelCallError`` that no retry
    can fix.

    Stores the runner's unfinished-turn messages when it can build them, then one
    turn-failure note when the turn has final tool call records, so the next turn's
    model does not repeat a write.
    """

    input_type = Any

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(
            loads=(WINDOW_LOAD, CHUNKS_LOAD, MapLoad(AGENT_TOOL_CALLS)),
            durability=StepDurability.SYNC,
        )

    async def execute(self, context: StepContext, input: Any) -> StepDecision:
        runtime = self.runtime
        state = context.state
        agent_state = require_state(state)
        if agent_state.active_turn_id is None:
            return go_to(start.AwaitUserMessage)
        error = context.recovery_error
        if error is not None:
            text = error.detail or error.error_type
        elif isinstance(input, str) and input:
            text = input  # a model call that failed in a way no retry can fix
        else:
            text = "the model call failed"
        messages = unfinished_turn_messages(context, runtime, agent_state) or []
        note = build_turn_failure_note(turn_records(state).values())
        if note is not None:
            messages.append(build_user_message(runtime, note, ()))
        last_sequence, _ = store_turn_messages(
            context, runtime, agent_state, messages, agent_state.active_turn_id
        )
        end_turn(context, runtime, agent_state, error=text, last_sequence=last_sequence)
        return go_to(start.AwaitUserMessage)
