"""Built-in ``ask_user`` and ``durable_wait`` on the embedded engine: answers, declines,
deadlines, durable Timers, invalid arguments and cancellations."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.events import (
    InterruptRaisedPayload,
    InterruptResolvedPayload,
    TimerStartedPayload,
)
from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.tool_calls import (
    CancellationReason,
    ToolCallStatus,
)
from dex_agents.domain.tool_outcomes import STEERED_TOOL_RESULT
from dex_agents.ports.flow_store import FlowStore
from tests.app.scripted_runner import ScriptedRunner
from tests.app.steering_support import TranscriptRunner, texts
from tests.app.waits_support import (
    BUILT_INS,
    payloads,
    record_with,
    stack,
    step_types,
)


async def test_ask_user_raises_a_question_and_the_model_sees_the_answer(store: FlowStore) -> None:
    options = AgentSessionOptions(built_in_tools=BUILT_INS)
    async with stack(store, ScriptedRunner(), options) as session:
        await session.sessions.start_session(
            "s1",
            'call ask_user {"question": "Which colour?", "choices": ["red", "blue"], '
            '"allows_free_text": false}',
        )
        interrupt = await session.until(
            "the question", lambda s: next(iter(s.pending_interrupts), None)
        )
        assert (interrupt.interrupt_id, interrupt.tool_call_id, interrupt.tool_name) == (
            "call-1",
            "call-1",
            "ask_user",
        )
        assert interrupt.kind is InterruptKind.QUESTION
        assert interrupt.question == "Which colour?"
        assert interrupt.choices == ("red", "blue")
        assert interrupt.allows_free_text is False
        assert interrupt.deadline is None
        record = await session.until("awaiting_answer", record_with(ToolCallStatus.AWAITING_ANSWER))
        assert record.interrupt_id == "call-1"
        assert record.effect.value == "read"
        assert not record.requires_approval
        info = await session.client.describe_flow("s1")
        assert "AwaitQuestionAnswer" in info.active_step_types  # findable as waiting for a person
        answers = session.sessions.answer_question
        assert await answers("s1", "call-1", "green") is False  # not a choice
        assert await answers("s1", "call-1", "   ") is False  # blank
        assert await session.sessions.resolve_interrupt("s1", "call-1", approved=True) is False
        assert await answers("s1", "call-1", "blue") is True
        assert await answers("s1", "call-1", "red") is False  # a second answer
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == 'ask_user={"status":"answered","answer":"blue"}'
        assert snapshot.pending_interrupts == ()
        events = await session.events()
        types = [event.type for event in events if event.type != "usage_recorded"]
        assert types == [
            "turn_started",
            "tool_call_deferred",
            "interrupt_raised",
            "interrupt_resolved",
            "tool_call_finished",
            "turn_completed",
        ]
        assert payloads(events, "interrupt_raised") == [
            InterruptRaisedPayload(
                interrupt_id="call-1",
                tool_call_id="call-1",
                tool_name="ask_user",
                deadline=None,
                kind=InterruptKind.QUESTION,
                question="Which colour?",
                choices=("red", "blue"),
                allows_free_text=False,
            )
        ]
        assert payloads(events, "interrupt_resolved") == [
            InterruptResolvedPayload(
                interrupt_id="call-1",
                approved=True,
                rejection_message=None,
                kind=InterruptKind.QUESTION,
                answered=True,
            )
        ]
        assert "AwaitQuestionAnswer" in await step_types(session)


async def test_free_text_answers_keep_non_ascii_and_null_means_absent(store: FlowStore) -> None:
    options = AgentSessionOptions(built_in_tools=BUILT_INS)
    async with stack(store, ScriptedRunner(), options) as session:
        await session.sessions.start_session(
            "s1", 'call ask_user {"question": "Name?", "choices": null, "allows_free_text": null}'
        )
        interrupt = await session.until(
            "the question", lambda s: next(iter(s.pending_interrupts), None)
        )
        assert (interrupt.choices, interrupt.allows_free_text) == ((), True)
        assert await session.sessions.answer_question("s1", "call-1", "Zoë") is True
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == 'ask_user={"status":"answered","answer":"Zoë"}'


async def test_a_declined_question_tells_the_model_the_user_declined(store: FlowStore) -> None:
    options = AgentSessionOptions(built_in_tools=BUILT_INS)
    async with stack(store, ScriptedRunner(), options) as session:
        await session.sessions.start_session("s1", 'call ask_user {"question": "Proceed?"}')
        await session.until("the question", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.resolve_interrupt(
            "s1", "call-1", approved=False, rejection_message="not now"
        )
        assert await session.sessions.answer_question("s1", "call-1", "yes") is False
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "ask_user=The user declined to answer."
        resolved = payloads(await session.events(), "interrupt_resolved")
        assert resolved == [
            InterruptResolvedPayload(
                interrupt_id="call-1",
                approved=False,
                rejection_message="The user declined to answer.",
                kind=InterruptKind.QUESTION,
                answered=False,
            )
        ]


async def test_a_question_whose_deadline_passes_tells_the_model(store: FlowStore) -> None:
    options = AgentSessionOptions(built_in_tools=BUILT_INS, interrupt_deadline=timedelta(seconds=1))
    async with stack(store, ScriptedRunner(), options) as session:
        await session.sessions.start_session("s1", 'call ask_user {"question": "Proceed?"}')
        interrupt = await session.until(
            "the question", lambda s: next(iter(s.pending_interrupts), None)
        )
        assert interrupt.deadline is not None
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "ask_user=question deadline passed"
        assert snapshot.pending_interrupts == ()
        assert await session.sessions.answer_question("s1", "call-1", "yes") is False
        resolved = payloads(await session.events(), "interrupt_resolved")
        assert [(p.approved, p.rejection_message, p.answered) for p in resolved] == [
            (False, "question deadline passed", False)
        ]


async def test_a_durable_wait_waits_on_a_timer_then_completes(store: FlowStore) -> None:
    options = AgentSessionOptions(built_in_tools=BUILT_INS)
    runner = ScriptedRunner()
    async with stack(store, runner, options) as session:
        await session.sessions.start_session(
            "s1", 'call durable_wait {"duration_seconds": 1, "reason": "let the build finish"}'
        )
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == (
            'durable_wait={"status":"completed","waited_seconds":1,"reason":"let the build finish"}'
        )
        assert len(runner.model_calls) == 2  # no model call holds the wait
        events = await session.events()
        (started,) = payloads(events, "timer_started")
        assert isinstance(started, TimerStartedPayload)
        assert (started.tool_call_id, started.reason) == ("call-1", "let the build finish")
        history = await step_types(session)
        assert history.count("AwaitTimer") == 2  # start the wait, then the Timer


async def test_a_waiting_durable_wait_records_wait_until(store: FlowStore) -> None:
    options = AgentSessionOptions(built_in_tools=BUILT_INS)
    async with stack(store, ScriptedRunner(), options) as session:
        await session.sessions.start_session(
            "s1", 'call durable_wait {"duration_seconds": 3600, "reason": "office hours"}'
        )
        record = await session.until("the wait", record_with(ToolCallStatus.WAITING_FOR_TIMER))
        assert record.wait_reason == "office hours"
        (started,) = payloads(await session.events(), "timer_started")
        assert record.wait_until == started.wait_until
        info = await session.client.describe_flow("s1")
        assert "AwaitTimer" in info.active_step_types


@pytest.mark.parametrize(
    ("arguments", "max_wait", "error"),
    [
        (
            'ask_user {"question": "  "}',
            None,
            "invalid ask_user arguments: question must be a non-blank string",
        ),
        (
            'ask_user {"question": "Pick", "allows_free_text": false}',
            None,
            "invalid ask_user arguments: allows_free_text is false, so choices are required",
        ),
        ("ask_user nope", None, "invalid ask_user arguments: arguments are not valid JSON"),
        (
            'durable_wait {"duration_seconds": 0, "reason": "x"}',
            None,
            "invalid durable_wait arguments: duration_seconds must be from 1 to 31536000",
        ),
        (
            'durable_wait {"duration_seconds": 11, "reason": "x"}',
            timedelta(seconds=10),
            "invalid durable_wait arguments: duration_seconds must be from 1 to 10",
        ),
        (
            'durable_wait {"duration_seconds": 5}',
            None,
            "invalid durable_wait arguments: reason is required",
        ),
    ],
)
async def test_invalid_arguments_fail_at_once_with_the_reason(
    store: FlowStore, arguments: str, max_wait: timedelta | None, error: str
) -> None:
    options = AgentSessionOptions(
        built_in_tools=BUILT_INS, max_durable_wait=max_wait or timedelta(days=365)
    )
    async with stack(store, ScriptedRunner(), options) as session:
        await session.sessions.start_session("s1", f"call {arguments}")
        snapshot = await session.idle()
        tool = arguments.split(" ", 1)[0]
        assert snapshot.messages[-1].text == f"{tool}=The tool call failed: {error}"
        types = {event.type for event in await session.events()}
        assert not types & {"interrupt_raised", "timer_started"}


async def test_a_steer_rejects_a_waiting_question_and_a_waiting_timer(store: FlowStore) -> None:
    # ResumeTurn wakes both through ToolCallCancellations; a cancellation that reaches a
    # call whose turn is neither steered nor cancelled is stale and ignored
    # (test_steering_races).
    options = AgentSessionOptions(built_in_tools=BUILT_INS)
    async with stack(store, TranscriptRunner(), options) as session:
        await session.sessions.start_session(
            "s1",
            'call ask_user {"question": "Proceed?"} and '
            'durable_wait {"duration_seconds": 600, "reason": "later"}',
        )
        await session.until("the question", record_with(ToolCallStatus.AWAITING_ANSWER))
        await session.until("the wait", record_with(ToolCallStatus.WAITING_FOR_TIMER, "call-2"))
        assert await session.sessions.steer_user_message("s1", text="stop")
        snapshot = await session.idle(turns=2)
        assert texts(snapshot.messages)[1:3] == [
            ("tool", f"ask_user={STEERED_TOOL_RESULT}"),
            ("tool", f"durable_wait={STEERED_TOOL_RESULT}"),
        ]
        assert snapshot.pending_interrupts == ()
        assert await session.sessions.answer_question("s1", "call-1", "yes") is False
        resolved = payloads(await session.events(), "interrupt_resolved")
        assert [(p.interrupt_id, p.cancellation_reason) for p in resolved] == [
            ("call-1", CancellationReason.STEERED)
        ]
