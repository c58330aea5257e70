"""Tool questions and tool tasks: where a call goes when its tool asks or starts remote work.

A tool Step whose tool returned ``ToolInputRequested`` stores the question on its
record and moves to ``AwaitQuestionAnswer``; one whose tool returned
``ToolTaskStarted`` records ``waiting_for_task``, writes ``tool_task_started`` and
moves to ``PollToolTask``. ``PollToolTask`` owns the record until it is final:
it waits on a Timer for ``task_poll_interval_seconds`` (a zero Timer while
``task_answer_pending``), calls ``poll_tool_task`` once, and records the result,
polls again, or asks the task's question. It takes no lock.

Once ``cancel_turn`` is recorded for the call's turn, a ``PollToolTask`` that
it did not cancel (one whose tool Step, which runs to its end, started the task
after the cancellation) polls no more: it waits on a zero Timer and goes to
``FinishTurnCancellation``, which hands the task to ``CancelToolTask``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dex_agents.app import tool_routing, tool_step_movements, tracing
from dex_agents.app.session import SessionRuntime
from dex_agents.app.session_events import SessionEventWriter, commit_event
from dex_agents.app.steps import questions, tool_steps, turn_control
from dex_agents.domain.events import AgentEventType, ToolTaskStartedPayload
from dex_agents.domain.runner_outcome_checks import (
    check_tool_task_poll_outcome,
)
from dex_agents.domain.runner_outcomes import (
    MIN_TASK_POLL_SECONDS,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskStarted,
)
from dex_agents.domain.tool_calls import (
    AgentToolCall,
    CancellationReason,
    ToolCallCancellation,
    ToolCallStatus,
)
from dex_agents.domain.tool_effects import ToolFailureRoute, tool_failure_route
from dex_agents.domain.tool_outcomes import (
    record_missing_tool_task_poller,
    record_tool_result,
)
from dex_agents.domain.tool_questions import (
    ask_tool_question,
    hand_over_task_answer,
    keep_polling,
    pending_task_answer,
    start_tool_task,
)
from dex_agents.domain.turns import idempotency_key
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    RetryPolicy,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    dead_end,
    go_to,
    go_to_many,
)
from dex_agents.ports.persistence import StateReader
from dex_agents.ports.runner import ToolTaskPoll
from dex_agents.ports.session_schema import AGENT_STATE, AGENT_TOOL_CALLS, TOOL_CALL_CANCELLATIONS
from dex_agents.ports.step_contexts import StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Wait, timer

POLL_TOOL_TASK_ATTEMPTS = 3
"""How many attempts one ``PollToolTask`` poll gets before its failure route runs."""


def continue_after(
    context: StepContext,
    runtime: SessionRuntime,
    record: AgentToolCall,
    outcome: ToolInputRequested | ToolTaskStarted,
) -> StepDecision:
    """Hand a call whose tool asked a question or started a task to the Step that waits for it.

    Stages the record (``awaiting_answer`` with the question, or
    ``waiting_for_task`` with ``task_id`` and ``task_poll_interval_seconds``) and,
    for a task, ``tool_task_started``. A runner without ``poll_tool_task`` gets
    ``MISSING_TOOL_TASK_POLLER`` for a started task.
    """
    if isinstance(outcome, ToolInputRequested):
        asking = ask_tool_question(record, outcome)
        context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, asking)
        return go_to_many(questions.question_movement(asking))
    if runtime.capabilities.tool_task_poller is None:
        tool_routing.finish_record(context, runtime, record_missing_tool_task_poller(record))
        return dead_end()
    waiting = start_tool_task(record, outcome)
    context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, waiting)
    commit_event(
        context,
        runtime.stream,
        record.turn_id,
        AgentEventType.TOOL_TASK_STARTED,
        ToolTaskStartedPayload(
            tool_call_id=record.tool_call_id, tool_name=record.tool_name, task_id=outcome.task_id
        ),
    )
    return go_to_many(poll_movement(runtime, waiting))


def poll_movement(runtime: SessionRuntime, record: AgentToolCall) -> StepMovement:
    """The movement to ``PollToolTask`` for a call, loading only its own record.

    3 attempts; failure route ``RecordToolFailure`` for ``read`` and
    ``idempotent_write`` calls and ``RecordToolOutcomeUnknown`` otherwise. A poll
    attempt may run as long as the call's tool Step.
    """
    tool_step = tool_step_movements.tool_step_movement(runtime, record).options or StepOptions()
    failure = (
        tool_steps.RecordToolFailure
        if tool_failure_route(record.effect) is ToolFailureRoute.RECORD_TOOL_FAILURE
        else tool_steps.RecordToolOutcomeUnknown
    )
    own = (tool_step_movements.own_record_load(record.tool_call_id),)
    options = StepOptions(
        execute_timeout=tool_step.execute_timeout,
        heartbeat_timeout=tool_step_movements.TOOL_STEP_HEARTBEAT_TIMEOUT,
        retry=RetryPolicy(maximum_attempts=POLL_TOOL_TASK_ATTEMPTS),
        failure_step=failure,
        loads=own,
        wait_loads=own,
        # A poll that failed before cancel_turn leaves its failure route and CancelToolTask
        # both to record the call: under the lock CancelToolTask holds, the second sees the
        # first's final record and ends. Until 2026-12-07 both recorded it, and a
        # CancelToolTask still in its cancel call overwrote a later turn's record that
        # reused the tool call ID.
        failure_locks=(AttributeLock(AGENT_TOOL_CALLS, record.tool_call_id),),
    )
    return StepMovement(PollToolTask, record.tool_call_id, options)


def _is_waiting_for_task(record: AgentToolCall | None) -> bool:
    return record is not None and record.status is ToolCallStatus.WAITING_FOR_TASK


def is_turn_cancelled(state: StateReader, record: AgentToolCall) -> bool:
    """Whether ``cancel_turn`` is recorded for the active turn, and ``record`` is one of its calls.

    A steer never counts: a started task runs to its result, questions included.
    """
    agent_state = state.get(AGENT_STATE)
    if agent_state is None or agent_state.active_turn_id != record.turn_id:
        return False
    reason = turn_control.turn_control_reason(state, agent_state)
    return reason is CancellationReason.TURN_CANCELLED


class PollToolTask(Step[str]):
    """Waits for a task's next poll, then calls ``poll_tool_task`` once and records what it says."""

    input_type = str

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        whole = (MapLoad(AGENT_TOOL_CALLS),)
        return StepOptions(
            retry=RetryPolicy(maximum_attempts=POLL_TOOL_TASK_ATTEMPTS),
            failure_step=tool_steps.RecordToolOutcomeUnknown,
            loads=whole,
            wait_loads=whole,
        )

    async def wait_for(self, context: WaitContext, input: str) -> Wait:
        record = context.state.get_instance(AGENT_TOOL_CALLS, input)
        if record is None or not _is_waiting_for_task(record):
            return Wait.skip()
        seconds = 0
        if not record.task_answer_pending and not is_turn_cancelled(context.state, record):
            seconds = record.task_poll_interval_seconds or MIN_TASK_POLL_SECONDS
        return Wait.any_of(
            ChannelCondition(TOOL_CALL_CANCELLATIONS, 1, input), timer(timedelta(seconds=seconds))
        )

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        with tracing.tool_attempt(context, self.runtime) as traced:
            return await self._execute(context, input, traced)

    async def _execute(
        self, context: StepContext, input: str, traced: tracing.ToolAttempt
    ) -> StepDecision:
        record = context.state.get_instance(AGENT_TOOL_CALLS, input)
        if record is None or not _is_waiting_for_task(record):
            return dead_end()  # final already, or not a task's call
        if is_turn_cancelled(context.state, record):
            # Created after cancel_turn, so not cancelled by it: abandon the task
            # instead of polling on. FinishTurnCancellation may run again safely.
            return go_to(turn_control.FinishTurnCancellation, record.turn_id)
        runtime = self.runtime
        if any(
            isinstance(message, ToolCallCancellation) for message in context.wait_result.messages
        ):
            # A started task is never cancelled by a steer: it runs to its result.
            return go_to_many(poll_movement(runtime, record))
        runner = runtime.capabilities.tool_task_poller
        if runner is None:
            tool_routing.finish_record(context, runtime, record_missing_tool_task_poller(record))
            return dead_end()
        traced.begin(record)
        writer = SessionEventWriter(context, runtime.stream, record.turn_id)
        poll = ToolTaskPoll(
            flow_id=context.flow_id,
            tool_call=record,
            idempotency_key=idempotency_key(context.flow_id, record.turn_id, record.tool_call_id),
            attempt=context.attempt,
            events=writer,
            heartbeat=context.heartbeat,
            pending_answer=pending_task_answer(record),
        )
        outcome = await tool_steps.run_tool(
            context,
            runtime,
            record,
            traced,
            writer,
            lambda: runner.poll_tool_task(poll),
            check_tool_task_poll_outcome,
        )
        if outcome is None:
            return dead_end()
        # The answer is handed over once: only this poll and its retries see it.
        record = hand_over_task_answer(record)
        if isinstance(outcome, ToolExecutionResult):
            tool_routing.finish_record(context, runtime, record_tool_result(record, outcome))
            return dead_end()
        if isinstance(outcome, ToolTaskPending):
            pending = keep_polling(record, outcome)
            context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, pending)
            return go_to_many(poll_movement(runtime, pending))
        asking = ask_tool_question(record, outcome)
        context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, asking)
        return go_to_many(questions.question_movement(asking))


def steps(runtime: SessionRuntime) -> list[Step[Any]]:
    """The Steps of tool tasks: ``PollToolTask`` (``AwaitQuestionAnswer`` is in ``builtin_steps``)."""
    return [PollToolTask(runtime)]
