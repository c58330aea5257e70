"""Tools that ask the user and tools that start tasks, on the embedded engine."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.events import ToolTaskStartedPayload
from dex_agents.domain.interrupts import InterruptKind, QuestionAnswer, QuestionResolution
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    DeferredToolCall,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_outcomes import MISSING_TOOL_TASK_POLLER, OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution, ToolTaskPoll
from tests.app.scripted_runner import ScriptedRunner
from tests.app.waits_support import (
    cancel_tool_call,
    payloads,
    record_with,
    stack,
    step_types,
)

READ = ToolPolicy(ToolEffect.READ)


def question_raised(
    interrupt_id: str, tool_call_id: str = "call-1"
) -> Callable[[AgentSnapshot], AgentToolCall | None]:
    """A snapshot probe: the asking call's record once the question is pending."""

    def probe(snapshot: AgentSnapshot) -> AgentToolCall | None:
        if not any(item.interrupt_id == interrupt_id for item in snapshot.pending_interrupts):
            return None
        return record_with(ToolCallStatus.AWAITING_ANSWER, tool_call_id)(snapshot)

    return probe


NO_APPROVAL_WRITE = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)


@dataclass
class AskingRunner(ScriptedRunner):
    """Its ``ask`` tool asks ``questions`` questions, one per run, before it answers."""

    questions: int = 1

    async def execute_deferred_tool_call(  # type: ignore[override]
        self, call: DeferredToolExecution
    ) -> ToolExecutionResult | ToolInputRequested:
        self.tool_calls.append(call)
        if call.tool_call.tool_name != "ask":
            return ToolExecutionResult("found")
        asked = len(call.input_answers)
        if asked < self.questions:
            return ToolInputRequested(
                f"Question {asked + 1}?",
                choices=("a", "b"),
                allows_free_text=False,
                continuation=f"q{asked + 1}",
            )
        continuation = call.tool_call.input_continuation
        return ToolExecutionResult(f"answers={list(call.input_answers)} after {continuation}")


@pytest.mark.parametrize(
    ("policy", "tool_step"),
    [(READ, "CallTool"), (NO_APPROVAL_WRITE, "CallSingleAttemptTool")],
)
async def test_a_tools_questions_return_the_call_to_its_tool_step_with_the_answers(
    store: FlowStore, policy: ToolPolicy, tool_step: str
) -> None:
    runner = AskingRunner(questions=2)
    async with stack(store, runner, AgentSessionOptions(tool_policies={"ask": policy})) as session:
        await session.sessions.start_session("s1", "call ask {}")
        record = await session.until("question 1", question_raised("call-1-input-1"))
        assert (record.interrupt_id, record.question, record.input_request_count) == (
            "call-1-input-1",
            "Question 1?",
            1,
        )
        assert record.input_continuation == "q1"
        (interrupt,) = (await session.sessions.get_agent_snapshot("s1")).pending_interrupts
        assert (interrupt.interrupt_id, interrupt.kind) == (
            "call-1-input-1",
            InterruptKind.QUESTION,
        )
        assert (interrupt.choices, interrupt.allows_free_text) == (("a", "b"), False)
        assert await session.sessions.answer_question("s1", "call-1-input-1", "c") is False
        assert await session.sessions.answer_question("s1", "call-1-input-1", "a") is True

        await session.until("question 2", question_raised("call-1-input-2"))
        assert await session.sessions.answer_question("s1", "call-1-input-2", "b") is True
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "ask=answers=['a', 'b'] after q2"
        assert [call.input_answers for call in runner.tool_calls] == [(), ("a",), ("a", "b")]
        assert (await step_types(session)).count(tool_step) == 3
        raised = payloads(await session.events(), "interrupt_raised")
        assert [(p.interrupt_id, p.question) for p in raised] == [
            ("call-1-input-1", "Question 1?"),
            ("call-1-input-2", "Question 2?"),
        ]


async def test_a_declined_tool_question_ends_the_call_without_running_it_again(
    store: FlowStore,
) -> None:
    runner = AskingRunner()
    async with stack(store, runner, AgentSessionOptions(tool_policies={"ask": READ})) as session:
        await session.sessions.start_session("s1", "call ask {}")
        await session.until("the question", question_raised("call-1-input-1"))
        assert await session.sessions.resolve_interrupt("s1", "call-1-input-1", approved=False)
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "ask=The user declined to answer."
        assert len(runner.tool_calls) == 1


@dataclass
class CollidingRunner(AskingRunner):
    """Names its calls ``x`` and ``x-input-1``: the second uses the first one's question ID."""

    ask_policy: ToolPolicy = READ

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.is_resuming:
            return await super().run_model_step(turn)
        self.model_calls.append(turn)
        return ToolCallsRequested(
            json.dumps({"turn": turn.turn_id}),
            [
                DeferredToolCall("x", "ask", "{}", self.ask_policy),
                DeferredToolCall("x-input-1", "lookup", "{}", READ),
            ],
            AgentUsage(model_calls=1),
        )


async def test_a_question_whose_interrupt_id_another_call_uses_fails_the_asking_call(
    store: FlowStore,
) -> None:
    async with stack(store, CollidingRunner()) as session:
        await session.sessions.start_session("s1", "go")
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == (
            "ask=The tool call failed: the tool asked a question, but its interrupt ID "
            "x-input-1 is already used by another tool call or interrupt of this turn; "
            "lookup=found"
        )
        assert payloads(await session.events(), "interrupt_raised") == []


@dataclass
class CollidingTaskRunner(CollidingRunner):
    """Its ``x`` call starts a payment task whose first poll asks under ``x-input-1``."""

    async def execute_deferred_tool_call(  # type: ignore[override]
        self, call: DeferredToolExecution
    ) -> ToolExecutionResult | ToolTaskStarted:
        if call.tool_call.tool_name != "ask":
            return ToolExecutionResult("found")
        return ToolTaskStarted(task_id="payment-7", poll_interval_seconds=0)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolInputRequested("Confirm the amount?")


async def test_a_started_write_tasks_question_whose_interrupt_id_is_in_use_is_outcome_unknown(
    store: FlowStore,
) -> None:
    # Before, the call recorded failed, as a tool's own question does before any effect:
    # the model read that the payment failed while its task went on.
    async with stack(store, CollidingTaskRunner(ask_policy=NO_APPROVAL_WRITE)) as session:
        await session.sessions.start_session("s1", "go")
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == f"ask={OUTCOME_UNKNOWN_TOOL_RESULT}; lookup=found"
        assert payloads(await session.events(), "interrupt_raised") == []


Poll = Callable[[ToolTaskPoll], ToolTaskPollOutcome]


@dataclass
class TaskRunner(ScriptedRunner):
    """Every tool starts a task; ``poll`` answers each poll (it may raise)."""

    poll: Poll = field(default=lambda poll: ToolExecutionResult("done"))
    polls: list[ToolTaskPoll] = field(default_factory=list)

    async def execute_deferred_tool_call(  # type: ignore[override]
        self, call: DeferredToolExecution
    ) -> ToolTaskStarted:
        self.tool_calls.append(call)
        return ToolTaskStarted(
            task_id=f"task-{call.tool_call.tool_call_id}", poll_interval_seconds=0
        )

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polls.append(poll)
        return self.poll(poll)


def scripted(*outcomes: ToolTaskPollOutcome | Exception) -> Poll:
    """A poll that returns (or raises) ``outcomes`` in order, one per poll attempt."""
    remaining = list(outcomes)

    def poll(_: ToolTaskPoll) -> ToolTaskPollOutcome:
        outcome = remaining.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return poll


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)  # real Timers: one store is enough
async def test_a_task_that_is_pending_twice_then_completes(store: FlowStore) -> None:
    runner = TaskRunner(
        poll=scripted(
            ToolTaskPending(poll_interval_seconds=0.2, continuation="c1"),
            ToolTaskPending(poll_interval_seconds=0.5),
            ToolExecutionResult("report ready"),
        )
    )
    options = AgentSessionOptions(tool_policies={"report": READ})
    async with stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call report {}")
        record = await session.until("the task", record_with(ToolCallStatus.WAITING_FOR_TASK))
        assert (record.task_id, record.task_poll_interval_seconds) == ("task-call-1", 1)
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "report=report ready"
        assert [poll.tool_call.input_continuation for poll in runner.polls] == [None, "c1", None]
        assert [poll.pending_answer for poll in runner.polls] == [None, None, None]
        assert {poll.idempotency_key for poll in runner.polls} == {"s1/turn-1/call-1"}
        assert runner.tool_calls[0].supports_tool_tasks is True
        assert (await step_types(session)).count("PollToolTask") == 3
        events = await session.events()
        assert payloads(events, "tool_task_started") == [
            ToolTaskStartedPayload(tool_call_id="call-1", tool_name="report", task_id="task-call-1")
        ]
        types = [event.type for event in events]
        assert types.index("tool_task_started") < types.index("tool_call_finished")


def answer_once(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    """A task that asks one question, takes its answer, and then needs one more poll."""
    if poll.tool_call.input_request_count == 0:
        return ToolInputRequested("Publish the draft?", choices=("yes", "no"), continuation="q-7")
    if poll.pending_answer is not None:
        if poll.attempt == 1:
            raise RuntimeError("the answer may not have reached the task")
        return ToolTaskPending(poll_interval_seconds=1, continuation="q-7")
    return ToolExecutionResult(f"published after {poll.tool_call.input_answers}")


async def test_a_tasks_question_is_handed_to_the_next_poll_only_and_its_retries(
    store: FlowStore,
) -> None:
    runner = TaskRunner(poll=answer_once)
    options = AgentSessionOptions(tool_policies={"publish": READ})
    async with stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call publish {}")
        record = await session.until("the question", question_raised("call-1-input-1"))
        assert (record.interrupt_id, record.task_id) == ("call-1-input-1", "task-call-1")
        # Steering never cancels a task's question: the wake is dropped.
        await cancel_tool_call(session, "call-1", CancellationReason.STEERED)
        assert await session.sessions.answer_question("s1", "call-1-input-1", "yes")
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "publish=published after ('yes',)"
        answered = QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer="yes")
        assert [(poll.attempt, poll.pending_answer) for poll in runner.polls] == [
            (1, None),
            (1, answered),
            (2, answered),
            (1, None),
        ]
        assert [poll.tool_call.input_continuation for poll in runner.polls] == [
            None,
            "q-7",
            "q-7",
            "q-7",
        ]


def report_resolution(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    """A task that asks once and reports how its question ended."""
    if poll.tool_call.input_request_count == 0:
        return ToolInputRequested("Publish the draft?")
    answer = poll.pending_answer
    assert answer is not None
    return ToolExecutionResult(f"{answer.resolution.value}:{answer.answer}")


@pytest.mark.parametrize(
    ("store", "resolution"),
    [("sqlite", "declined"), ("memory", "deadline_passed")],
    indirect=["store"],
)
async def test_a_tasks_declined_or_expired_question_goes_back_to_the_task(
    store: FlowStore, resolution: str
) -> None:
    runner = TaskRunner(poll=report_resolution)
    deadline = timedelta(seconds=1) if resolution == "deadline_passed" else None
    options = AgentSessionOptions(tool_policies={"publish": READ}, interrupt_deadline=deadline)
    async with stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call publish {}")
        await session.until("the question", question_raised("call-1-input-1"))
        if resolution == "declined":
            assert await session.sessions.resolve_interrupt("s1", "call-1-input-1", approved=False)
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == f"publish={resolution}:None"


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # real retry delays: one store
async def test_a_poll_that_keeps_raising_is_recorded_by_the_calls_effect(
    store: FlowStore,
) -> None:
    def down(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        raise RuntimeError("the task service is down")

    runner = TaskRunner(poll=down)
    options = AgentSessionOptions(
        tool_policies={
            "read_task": READ,
            "idem_task": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
            "pay_task": NO_APPROVAL_WRITE,
        }
    )
    async with stack(store, runner, options) as session:
        await session.sessions.start_session(
            "s1", "call read_task {} and idem_task {} and pay_task {}"
        )
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == (
            "read_task=The tool call failed: RuntimeError: the task service is down; "
            f"idem_task={OUTCOME_UNKNOWN_TOOL_RESULT}; pay_task={OUTCOME_UNKNOWN_TOOL_RESULT}"
        )
        attempts = sorted((poll.tool_call.tool_call_id, poll.attempt) for poll in runner.polls)
        assert attempts == [(f"call-{n}", attempt) for n in (1, 2, 3) for attempt in (1, 2, 3)]
        history = await step_types(session)
        assert (history.count("RecordToolFailure"), history.count("RecordToolOutcomeUnknown")) == (
            2,
            1,
        )


@dataclass
class PollerlessRunner(ScriptedRunner):
    """Starts tasks but has no ``poll_tool_task``."""

    async def execute_deferred_tool_call(  # type: ignore[override]
        self, call: DeferredToolExecution
    ) -> ToolTaskStarted:
        self.tool_calls.append(call)
        return ToolTaskStarted(task_id="orphan", poll_interval_seconds=5)


async def test_a_runner_without_poll_tool_task_records_missing_tool_task_poller(
    store: FlowStore,
) -> None:
    runner = PollerlessRunner()
    options = AgentSessionOptions(tool_policies={"read_task": READ, "pay_task": NO_APPROVAL_WRITE})
    async with stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call read_task {} and pay_task {}")
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == (
            f"read_task=The tool call failed: {MISSING_TOOL_TASK_POLLER}; "
            f"pay_task={OUTCOME_UNKNOWN_TOOL_RESULT}"
        )
        assert [call.supports_tool_tasks for call in runner.tool_calls] == [False, False]
        assert "PollToolTask" not in await step_types(session)
