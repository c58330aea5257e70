"""``AwaitQuestionAnswer``: the question of an ``ask_user`` call, of a tool, or of a tool task.

One Step serves all three. An ``ask_user`` call arrives from ``RunModel`` not
raised yet; a tool's question arrives stored on its record by the tool Step or
``PollToolTask`` (``awaiting_answer``, no ``interrupt_id`` yet). Either way the
Step first waits on a zero Timer, then raises the ``question`` interrupt in
Execute under the ``PendingInterrupts`` lock, so parallel calls can ask at once,
and waits again for ``InterruptResolutions.for_one(<interrupt ID>)``,
``ToolCallCancellations.for_one(<tool call ID>)`` and, while the question is
pending with a deadline, a Timer at that deadline.

An ``ask_user`` answer, decline or passed deadline is the call's result. A tool's
answer returns the call to its tool Step with the answer in ``input_answers``; a
decline or a passed deadline is its result, because the tool has taken no effect
yet. A task's question never ends the call: its resolution goes back to
``PollToolTask`` (see ``dex_agents.domain.tool_questions``).

A question that is not raised yet belongs to a call that has not started
waiting: when its turn is already steered or cancelled, the first Execute
records it ``rejected`` with that ``cancellation_reason`` instead of raising it
(``turn_control.cancel_before_start``), after invalid ``ask_user`` arguments,
which fail at once. Since this Step and ``ResumeTurn`` both lock
``PendingInterrupts``, a steer wake either sees the raised question and wakes
it, or runs first and leaves the call to this check: never both. A task's
question in a cancelled turn goes to ``FinishTurnCancellation``, which abandons
the task.
"""

from __future__ import annotations

from datetime import timedelta

import attrs

from dex_agents.app import tool_routing, tool_step_movements
from dex_agents.app.session import SessionRuntime, deadline_from
from dex_agents.app.session_events import commit_event, commit_interrupt_resolved
from dex_agents.app.steps import tool_steps, tool_tasks, turn_control
from dex_agents.domain.builtin_tools import AskUserArguments, parse_ask_user_arguments
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import (
    AgentEventType,
    InterruptRaisedPayload,
)
from dex_agents.domain.interrupts import (
    AgentInterrupt,
    AgentInterruptResolution,
    InterruptKind,
    QuestionAnswer,
    QuestionResolution,
    without_interrupt,
)
from dex_agents.domain.tool_calls import (
    AgentToolCall,
    CancellationReason,
    ToolCallCancellation,
    ToolCallStatus,
)
from dex_agents.domain.tool_outcomes import cancel_unstarted_tool_call
from dex_agents.domain.tool_questions import (
    QUESTION_RESOLUTION_MESSAGES,
    is_question_raised,
    question_interrupt_id,
    raise_question,
    refuse_question_in_use,
    settle_question,
)
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    dead_end,
    go_to,
    go_to_many,
)
from dex_agents.ports.session_schema import (
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    TOOL_CALL_CANCELLATIONS,
)
from dex_agents.ports.step_contexts import StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Condition, Wait, timer


def question_movement(record: AgentToolCall) -> StepMovement:
    """The movement to ``AwaitQuestionAnswer`` for a call.

    It loads only the call's own record, plus, for a tool's question, the record
    its interrupt ID would name, so Execute can tell whether another call uses it.
    A failure route by effect keeps a broken Step from failing the whole session.
    """
    own = tool_step_movements.own_record_load(record.tool_call_id)
    loads: tuple[MapLoad, ...] = (own,)
    interrupt_id = question_interrupt_id(record)
    if interrupt_id != record.tool_call_id:
        loads = (own, tool_step_movements.own_record_load(interrupt_id))
    options = StepOptions(
        locks=(AttributeLock(PENDING_INTERRUPTS),),
        loads=loads,
        wait_loads=(own,),
        failure_step=tool_step_movements.failure_step_for(record),
    )
    return StepMovement(AwaitQuestionAnswer, record.tool_call_id, options)


class AwaitQuestionAnswer(Step[str]):
    """Raises a call's ``question`` interrupt, then waits for its answer, decline or deadline."""

    input_type = str

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        whole = (MapLoad(AGENT_TOOL_CALLS),)
        return StepOptions(
            locks=(AttributeLock(PENDING_INTERRUPTS),), loads=whole, wait_loads=whole
        )

    async def wait_for(self, context: WaitContext, input: str) -> Wait:
        record = context.state.get_instance(AGENT_TOOL_CALLS, input)
        if record is None or record.is_final:
            return Wait.skip()
        cancellation = ChannelCondition(TOOL_CALL_CANCELLATIONS, 1, input)
        if not is_question_raised(record):
            # Raising needs the PendingInterrupts lock, which only Execute holds.
            return Wait.any_of(cancellation, timer(timedelta(0)))
        interrupt_id = record.interrupt_id or input
        conditions: list[Condition] = [
            cancellation,
            ChannelCondition(INTERRUPT_RESOLUTIONS, 1, interrupt_id),
        ]
        pending = context.state.get(PENDING_INTERRUPTS) or ()
        interrupt = next((item for item in pending if item.interrupt_id == interrupt_id), None)
        if interrupt is not None and interrupt.deadline is not None:
            conditions.append(timer(tool_steps.timer_until(context.now, interrupt.deadline)))
        return Wait.any_of(*conditions)

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        record = context.state.get_instance(AGENT_TOOL_CALLS, input)
        if record is None or record.is_final:
            return dead_end()
        answered_first = any(
            isinstance(message, AgentInterruptResolution)
            for message in context.wait_result.messages
        )
        if (
            record.task_id is not None
            and tool_tasks.is_turn_cancelled(context.state, record)
            and not answered_first
        ):
            # cancel_turn abandons a started task, question included. An answer that
            # committed first is recorded below all the same (FinishTurnCancellation sent
            # the call back for it), then PollToolTask abandons the task: left waiting, the
            # answer would answer a later turn's question with the same interrupt ID.
            return go_to(turn_control.FinishTurnCancellation, record.turn_id)
        if not is_question_raised(record):
            return self._start(context, record)
        interrupt_id = record.interrupt_id or input
        result = context.wait_result
        state = context.state
        pending = state.get(PENDING_INTERRUPTS) or ()
        if result.timer_fired or not result.messages:
            interrupt = next((item for item in pending if item.interrupt_id == interrupt_id), None)
            if interrupt is None or interrupt.deadline is None or context.now < interrupt.deadline:
                # Resolved meanwhile (its message waits), or a Timer that fired early.
                return go_to_many(question_movement(record))
            state.set(PENDING_INTERRUPTS, without_interrupt(pending, interrupt_id))
            return self._settle(
                context, record, QuestionAnswer(resolution=QuestionResolution.DEADLINE_PASSED)
            )
        (message,) = result.messages
        if isinstance(message, ToolCallCancellation):
            if turn_control.is_stale_cancellation(state, record):
                return go_to_many(question_movement(record))
            return self._cancel(context, record, message.reason)
        assert isinstance(message, AgentInterruptResolution)
        if message.cancellation_reason is not None and record.task_id is None:
            return self._cancel(context, record, message.cancellation_reason)
        state.set(PENDING_INTERRUPTS, without_interrupt(pending, interrupt_id))
        if message.approved and message.answer is not None:
            answer = QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer=message.answer)
        else:
            answer = QuestionAnswer(resolution=QuestionResolution.DECLINED)
        return self._settle(context, record, answer)

    def _start(self, context: StepContext, record: AgentToolCall) -> StepDecision:
        # Invalid ask_user arguments fail at once, so they keep their own result
        # even in a steered turn; a valid call that has not started waiting yet
        # is cancelled here rather than raised.
        arguments = None
        if record.built_in:
            try:
                arguments = parse_ask_user_arguments(record.arguments)
            except ToolExecutionError as error:
                failed = attrs.evolve(record, status=ToolCallStatus.FAILED, error=str(error))
                tool_routing.finish_record(context, self.runtime, failed)
                return dead_end()
        cancelled = turn_control.cancel_before_start(context, self.runtime, record)
        if cancelled is not None:
            return cancelled
        return self._raise(context, record, arguments)

    def _raise(
        self, context: StepContext, record: AgentToolCall, arguments: AskUserArguments | None
    ) -> StepDecision:
        state = context.state
        interrupt_id = question_interrupt_id(record)
        question, choices, allows_free_text = (
            record.question,
            record.choices,
            record.allows_free_text,
        )
        if arguments is not None:
            question = arguments.question
            choices = arguments.choices
            allows_free_text = arguments.allows_free_text
        pending = state.get(PENDING_INTERRUPTS) or ()
        used_by_record = interrupt_id != record.tool_call_id and (
            state.get_instance(AGENT_TOOL_CALLS, interrupt_id) is not None
        )
        if used_by_record or any(item.interrupt_id == interrupt_id for item in pending):
            refused = refuse_question_in_use(record, interrupt_id)
            tool_routing.finish_record(context, self.runtime, refused)
            return dead_end()
        interrupt = AgentInterrupt(
            interrupt_id=interrupt_id,
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            kind=InterruptKind.QUESTION,
            turn_id=record.turn_id,
            arguments=record.arguments,
            deadline=deadline_from(context.now, self.runtime.options),
            question=question,
            choices=choices,
            allows_free_text=allows_free_text,
        )
        state.set(PENDING_INTERRUPTS, (*pending, interrupt))
        raised = raise_question(
            record,
            interrupt_id,
            question=question,
            choices=choices,
            allows_free_text=allows_free_text,
        )
        state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, raised)
        commit_event(
            context,
            self.runtime.stream,
            record.turn_id,
            AgentEventType.INTERRUPT_RAISED,
            InterruptRaisedPayload(
                interrupt_id=interrupt_id,
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                deadline=interrupt.deadline,
                kind=InterruptKind.QUESTION,
                question=question,
                choices=choices,
                allows_free_text=allows_free_text,
            ),
        )
        return go_to_many(question_movement(raised))

    def _cancel(
        self, context: StepContext, record: AgentToolCall, reason: CancellationReason
    ) -> StepDecision:
        if record.task_id is not None:
            # Steering never cancels a task's question; cancel_turn abandons the task instead.
            return go_to_many(question_movement(record))
        interrupt_id = record.interrupt_id or record.tool_call_id
        pending = context.state.get(PENDING_INTERRUPTS) or ()
        context.state.set(PENDING_INTERRUPTS, without_interrupt(pending, interrupt_id))
        self._resolved(context, record, approved=False, rejection=None, reason=reason)
        tool_routing.finish_record(
            context, self.runtime, cancel_unstarted_tool_call(record, reason)
        )
        return dead_end()

    def _settle(
        self, context: StepContext, record: AgentToolCall, answer: QuestionAnswer
    ) -> StepDecision:
        runtime = self.runtime
        answered = answer.resolution is QuestionResolution.ANSWERED
        rejection = QUESTION_RESOLUTION_MESSAGES.get(answer.resolution)
        self._resolved(context, record, approved=answered, rejection=rejection, answered=answered)
        settled = settle_question(record, answer)
        if settled.is_final:
            tool_routing.finish_record(context, runtime, settled)
            return dead_end()
        context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, settled)
        if settled.status is ToolCallStatus.WAITING_FOR_TASK:
            # The task has started, so its question never ends the call.
            return go_to_many(tool_tasks.poll_movement(runtime, settled))
        return go_to_many(tool_step_movements.tool_step_movement(runtime, settled))

    def _resolved(
        self,
        context: StepContext,
        record: AgentToolCall,
        *,
        approved: bool,
        rejection: str | None,
        answered: bool = False,
        reason: CancellationReason | None = None,
    ) -> None:
        commit_interrupt_resolved(
            context,
            self.runtime.stream,
            record.turn_id,
            record.interrupt_id or record.tool_call_id,
            InterruptKind.QUESTION,
            approved=approved,
            rejection=rejection,
            answered=answered,
            reason=reason,
        )
