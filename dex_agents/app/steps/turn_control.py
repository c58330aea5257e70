"""Steering and turn cancellation: ``ApplyTurnControl`` and ``FinishTurnCancellation``.

``steer_user_message`` publishes the message to ``SteeredUserMessages`` and a
wake to ``TurnControlRequests``; ``cancel_turn`` records ``TurnCancellationRequest``
for the turn. A turn is *steered* while steered messages wait and *cancelled*
once its request is recorded (``turn_control_reason``). No Step is interrupted
by a steer: ``RunModel``, ``ResumeTurn`` and the tool Steps check at their
start and end the turn, or cancel a call that has not started, at that safe
boundary. ``cancel_turn`` instead cancels the model call and the waits, and
``FinishTurnCancellation`` records what they were waiting for, handing each
started tool task to ``CancelToolTask`` (``cancel_tool_task``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import attrs

from dex_agents.app import tool_routing, tool_step_movements
from dex_agents.app.message_store import CHUNKS_LOAD, WINDOW_LOAD
from dex_agents.app.session import (
    SessionRuntime,
    build_user_message,
    clear_turn,
    require_state,
    store_turn_messages,
    turn_records,
)
from dex_agents.app.session_events import commit_event, commit_interrupt_resolved
from dex_agents.app.steps import questions, start, turn_end
from dex_agents.app.steps.cancel_tool_task import cancel_tool_task_movement
from dex_agents.domain.builtin_tools import durable_wait_output, parse_durable_wait_arguments
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import (
    AgentEventType,
    TurnCancelledPayload,
    TurnSteeredPayload,
)
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.state import AgentState, AgentStatus, TurnControlRequest
from dex_agents.domain.tool_calls import (
    AgentToolCall,
    CancellationReason,
    ToolCallStatus,
)
from dex_agents.domain.tool_outcomes import (
    build_turn_failure_note,
    cancel_unstarted_tool_call,
)
from dex_agents.domain.tool_questions import is_question_raised
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    Step,
    StepDecision,
    StepDurability,
    StepMovement,
    StepOptions,
    dead_end,
    go_to,
    go_to_many,
)
from dex_agents.ports.persistence import StateReader
from dex_agents.ports.session_schema import (
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents.ports.step_contexts import StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Wait

_TURN_CONTROL_LOCKS = (
    AttributeLock(TURN_CANCELLATION_REQUEST),
    AttributeLock(PENDING_INTERRUPTS),
)


def turn_control_reason(state: StateReader, agent_state: AgentState) -> CancellationReason | None:
    """Why the active turn must end at its next safe Step boundary, or ``None``.

    ``turn_cancelled`` once ``cancel_turn`` recorded a request for the turn,
    else ``steered`` while steered messages wait. ``None`` when no turn is active
    or the turn does not accept turn control.
    """
    turn = agent_state.active_turn_id
    if turn is None or not agent_state.accepts_turn_control:
        return None
    request = state.get(TURN_CANCELLATION_REQUEST)
    if request is not None and request.turn_id == turn:
        return CancellationReason.TURN_CANCELLED
    if state.channel_size(STEERED_USER_MESSAGES) > 0:
        return CancellationReason.STEERED
    return None


def is_stale_cancellation(state: StateReader, record: AgentToolCall) -> bool:
    """Whether a ``ToolCallCancellations`` message that reached ``record``'s wait was left
    for an earlier call with the same tool call ID.

    A steer wake cancels a wait through that ChannelMap, keyed by tool call ID
    only. When ``cancel_turn`` ends the woken wait before it takes the message,
    the message stays behind, and a later turn's call that reuses the ID would
    take it. A real cancellation always reaches its call while the call's turn is
    active and steered or cancelled, so one that finds the turn neither is stale:
    the waiting Step ignores it and waits on.
    """
    agent_state = state.get(AGENT_STATE)
    return (
        agent_state is None
        or agent_state.active_turn_id != record.turn_id
        or turn_control_reason(state, agent_state) is None
    )


def steered_or_cancelled(
    context: StepContext, runtime: SessionRuntime, agent_state: AgentState
) -> StepDecision | None:
    """``RunModel``'s first check: end a steered or cancelled turn without a model call.

    Ending the turn in ``RunModel``'s own commit leaves no active turn behind,
    so a ``cancel_turn`` that races it returns ``False`` instead of starting a
    second ``ApplyTurnControl``. ``None`` lets the model call go ahead.
    """
    if turn_control_reason(context.state, agent_state) is None:
        return None
    steered = context.state.channel_size(STEERED_USER_MESSAGES)
    end_controlled_turn(context, runtime, agent_state, steered_message_count=steered)
    return go_to(ApplyTurnControl)


def cancel_before_start(
    context: StepContext, runtime: SessionRuntime, record: AgentToolCall
) -> StepDecision | None:
    """A tool Step's check before ``tool_call_started``: a steered or cancelled turn's call
    records ``rejected`` with its ``cancellation_reason`` and never runs.

    Only the first attempt checks, since a retry's tool already started, and a
    call with a started task is never rejected. ``None`` lets the tool run.
    """
    if context.attempt > 1 or record.task_id is not None:
        return None
    agent_state = context.state.get(AGENT_STATE)
    if agent_state is None or agent_state.active_turn_id != record.turn_id:
        return None
    reason = turn_control_reason(context.state, agent_state)
    if reason is None:
        return None
    tool_routing.finish_record(context, runtime, cancel_unstarted_tool_call(record, reason))
    return dead_end()


def end_controlled_turn(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    *,
    steered_message_count: int,
) -> AgentState:
    """End the active steered or cancelled turn; stage ``turn_steered`` or ``turn_cancelled``.

    Stores the runner's unfinished-turn messages when it builds them, else a note
    that lists the calls that ran (as after a failed turn), then clears the
    turn's records, run state and interrupts. The turn neither completed nor
    failed, so ``last_turn_error`` stays as it was; a cancelled turn is kept in
    ``cancelled_turn_id``.
    """
    state = context.state
    turn = agent_state.active_turn_id or ""
    reason = turn_control_reason(state, agent_state) or CancellationReason.STEERED
    cancelled = reason is CancellationReason.TURN_CANCELLED
    records = turn_records(state)
    for key, record in list(records.items()):
        if record.write_queued and not record.is_final:
            # A queued write that never started ends like any unstarted call, with
            # its tool_call_finished, before the turn's records are cleared.
            records[key] = cancel_unstarted_tool_call(record, reason)
            tool_routing.finish_queued_write(context, runtime, records[key])
    messages = turn_end.unfinished_turn_messages(context, runtime, agent_state)
    if messages is None:
        note = build_turn_failure_note(records.values())
        messages = [] if note is None else [build_user_message(runtime, note, ())]
    last_sequence, _ = store_turn_messages(context, runtime, agent_state, messages, turn)
    clear_turn(state, list(records))
    agent_state = attrs.evolve(
        agent_state,
        status=AgentStatus.WAITING_FOR_USER_MESSAGE,
        active_turn_id=None,
        last_sequence=last_sequence,
        # In the commit of turn_cancelled, so a reader of the state alone knows it too.
        cancelled_turn_id=turn if cancelled else agent_state.cancelled_turn_id,
    )
    state.set(AGENT_STATE, agent_state)
    if cancelled:
        payload: TurnCancelledPayload | TurnSteeredPayload = TurnCancelledPayload(
            message_count=agent_state.last_sequence
        )
        event_type = AgentEventType.TURN_CANCELLED
    else:
        payload = TurnSteeredPayload(
            steered_message_count=steered_message_count, message_count=agent_state.last_sequence
        )
        event_type = AgentEventType.TURN_STEERED
    commit_event(context, runtime.stream, turn, event_type, payload)
    return agent_state


class ApplyTurnControl(Step[None]):
    """Consumes every stale wake and steered message, ends an active steered or cancelled turn,
    and starts a turn with the steered messages, in order, or waits for the next message."""

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(
            loads=(WINDOW_LOAD, CHUNKS_LOAD, MapLoad(AGENT_TOOL_CALLS)),
            locks=_TURN_CONTROL_LOCKS,
            durability=StepDurability.SYNC,
        )

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        # One wait consumes one Channel: the wakes first, then (in the next
        # execution) every steered message. Only this Step consumes steered
        # messages, and no other waiting Step runs meanwhile, so the counts hold.
        wakes = context.state.channel_size(TURN_CONTROL_REQUESTS)
        if wakes:
            return Wait.until(ChannelCondition(TURN_CONTROL_REQUESTS, wakes))
        steered = context.state.channel_size(STEERED_USER_MESSAGES)
        if steered:
            return Wait.until(ChannelCondition(STEERED_USER_MESSAGES, steered))
        return Wait.skip()

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        consumed = context.wait_result.messages
        if any(isinstance(message, TurnControlRequest) for message in consumed):
            return go_to(ApplyTurnControl)
        steered = [message for message in consumed if isinstance(message, AgentUserMessage)]
        runtime = self.runtime
        agent_state = require_state(context.state)
        if agent_state.active_turn_id is not None:
            agent_state = end_controlled_turn(
                context, runtime, agent_state, steered_message_count=len(steered)
            )
        if not steered:
            return go_to(start.AwaitUserMessage)
        return start.start_user_turn(context, runtime, agent_state, steered)


class FinishTurnCancellation(Step[str]):
    """After ``cancel_turn``: ends the turn whose model call was cancelled, or records each
    call whose wait was cancelled and hands each started task to ``CancelToolTask``."""

    input_type = str

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(
            loads=(MapLoad(AGENT_TOOL_CALLS),),
            locks=_TURN_CONTROL_LOCKS,
            durability=StepDurability.SYNC,
        )

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        agent_state = require_state(context.state)
        if agent_state.active_turn_id != input:
            return dead_end()  # the turn ended first
        if agent_state.status in (AgentStatus.RUNNING_MODEL, AgentStatus.COMPACTING_CONTEXT):
            return go_to(ApplyTurnControl)
        tasks = self._cancel_waits(context, agent_state)
        return go_to_many(*tasks) if tasks else dead_end()

    def _cancel_waits(self, context: StepContext, agent_state: AgentState) -> list[StepMovement]:
        # ResumeTurn still waits for one result per call; it ends the turn once
        # the calls that still run have finished.
        runtime, state = self.runtime, context.state
        tasks: list[StepMovement] = []
        ended: set[str] = set()
        pending_ids = {interrupt.interrupt_id for interrupt in state.get(PENDING_INTERRUPTS) or ()}
        for record in sorted(turn_records(state).values(), key=lambda r: r.deferral_order):
            if record.is_final:
                continue
            answered_first = _answered_first(record, pending_ids)
            if answered_first is not None:
                # Its answer committed before cancel_turn: the cancelled wait handed the
                # answer back, and the waiting Step takes it again and records it.
                tasks.append(answered_first)
            elif record.task_id is not None:
                tasks.append(cancel_tool_task_movement(record.tool_call_id))
                ended.add(record.tool_call_id)
            elif record.status is ToolCallStatus.WAITING_FOR_TIMER:
                tool_routing.finish_record(context, runtime, self._timer_result(context, record))
            elif record.write_queued:  # ResumeTurn waits for no result of it
                cancelled = cancel_unstarted_tool_call(record, CancellationReason.TURN_CANCELLED)
                tool_routing.finish_queued_write(context, runtime, cancelled)
            elif (
                record.built_in  # ask_user and durable_wait wait in a cancelled Step
                or record.status
                in (ToolCallStatus.AWAITING_APPROVAL, ToolCallStatus.AWAITING_ANSWER)
            ):
                cancelled = cancel_unstarted_tool_call(record, CancellationReason.TURN_CANCELLED)
                tool_routing.finish_record(context, runtime, cancelled)
                ended.add(record.tool_call_id)
            # An approved call's tool Step runs to its end, or records it cancelled
            # itself before its tool starts.
        pending = state.get(PENDING_INTERRUPTS) or ()
        removed = [interrupt for interrupt in pending if interrupt.tool_call_id in ended]
        if removed:
            state.set(PENDING_INTERRUPTS, tuple(i for i in pending if i not in removed))
        self._resolved(context, agent_state, removed)
        return tasks

    def _timer_result(self, context: StepContext, record: AgentToolCall) -> AgentToolCall:
        # A durable wait whose Timer was due before the cancellation keeps its result.
        if record.wait_until is not None and record.wait_until <= context.now:
            try:
                # Its arguments passed the limit when the wait started, as in AwaitTimer:
                # a limit lowered since must not take the result of a wait that ran.
                arguments = parse_durable_wait_arguments(
                    record.arguments, max_durable_wait=timedelta.max
                )
            except ToolExecutionError:
                pass
            else:
                output = durable_wait_output(
                    arguments.duration_seconds, record.wait_reason or arguments.reason
                )
                return attrs.evolve(record, status=ToolCallStatus.SUCCEEDED, output=output)
        return cancel_unstarted_tool_call(record, CancellationReason.TURN_CANCELLED)

    def _resolved(
        self, context: StepContext, agent_state: AgentState, removed: Sequence[AgentInterrupt]
    ) -> None:
        for interrupt in removed:
            commit_interrupt_resolved(
                context,
                self.runtime.stream,
                agent_state.active_turn_id,
                interrupt.interrupt_id,
                interrupt.kind,
                approved=False,
                reason=CancellationReason.TURN_CANCELLED,
            )


def _answered_first(record: AgentToolCall, pending_ids: set[str]) -> StepMovement | None:
    """The waiting Step to send a call back to when its approval or answer beat ``cancel_turn``.

    ``resolve_interrupt`` and ``answer_question`` remove the interrupt and publish
    the answer in one commit, so a raised approval or question that is no longer
    pending has an answer waiting for it. A task's question goes back too, so its
    answer is taken rather than left for a later question with the same interrupt
    ID; ``PollToolTask`` then abandons the task. ``None`` for every other call.
    """
    if record.status is ToolCallStatus.AWAITING_APPROVAL and record.tool_call_id not in pending_ids:
        return tool_step_movements.approval_movement(record)
    if (
        is_question_raised(record)
        and (record.interrupt_id or record.tool_call_id) not in pending_ids
    ):
        return questions.question_movement(record)
    return None
