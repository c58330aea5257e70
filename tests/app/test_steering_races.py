"""Races between steering or ``cancel_turn`` and built-in waits and tool tasks that have not
started waiting yet, on the embedded engine (``test_steering_race_steps`` has them Step by Step)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from dex_agents.adapters.local.probes import wait_until
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT, STEERED_TOOL_RESULT
from dex_agents.ports.flow_client import EXECUTE_COMPLETED_EVENT
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.session_schema import TOOL_CALL_CANCELLATIONS
from tests.app.harness import Session, echo, session_stack
from tests.app.steering_support import (
    CancellableTaskRunner,
    SlowModelRunner,
    TranscriptRunner,
    texts,
)
from tests.app.waits_support import cancel_tool_call
from tests.app.waits_support import stack as cancellable_stack

BUILT_INS = AgentSessionOptions(
    built_in_tools=frozenset({BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT})
)
ASK = 'call ask_user {"question": "Proceed?"}'
WAIT = 'call durable_wait {"duration_seconds": 1, "reason": "cool down"}'


@dataclass
class SlowTranscriptRunner(SlowModelRunner, TranscriptRunner):
    """Holds the ``slow_text`` model call until released, and keeps a steered turn's records."""


async def pending_cancellations(session: Session, tool_call_id: str) -> int:
    """How many ``ToolCallCancellations`` messages wait for a tool call ID."""
    return len(
        await session.client.engine.read(
            lambda tx: tx.pending_messages("s1", TOOL_CALL_CANCELLATIONS.name, tool_call_id)
        )
    )


def turns_of(events: list[AgentEvent], event_type: str) -> list[str | None]:
    return [event.turn_id for event in events if event.type == event_type]


async def steer_while_the_model_asks_for(session: Session, text: str) -> AgentToolCall:
    """Steer with ``text`` while turn 1's model call for ``text`` runs; the call it then requests
    never starts waiting. Returns turn 1's record of that call."""
    runner = session.runner
    assert isinstance(runner, SlowTranscriptRunner)
    await session.sessions.start_session("s1", text)
    await asyncio.wait_for(runner.entered.wait(), 10)
    assert await session.sessions.steer_user_message("s1", text=text)
    runner.release.set()
    await session.until("turn 2", lambda s: s.state and s.state.active_turn_id == "turn-2")
    (records,) = runner.unfinished
    return records["call-1"]


async def test_a_steer_before_an_ask_user_question_is_raised_rejects_the_call(
    store: FlowStore,
) -> None:
    runner = SlowTranscriptRunner(slow_text=ASK)
    async with session_stack(store, runner, BUILT_INS) as session:
        steered = await steer_while_the_model_asks_for(session, ASK)
        assert (steered.status, steered.cancellation_reason) == (
            ToolCallStatus.REJECTED,
            CancellationReason.STEERED,
        )
        assert steered.interrupt_id is None  # never raised
        # Turn 2 reuses the tool call ID: its question waits for the answer.
        interrupt = await session.until(
            "turn 2's question", lambda s: next(iter(s.pending_interrupts), None)
        )
        assert (interrupt.interrupt_id, interrupt.turn_id) == ("call-1", "turn-2")
        assert await pending_cancellations(session, "call-1") == 0
        assert await session.sessions.answer_question("s1", "call-1", "yes") is True
        snapshot = await session.idle(turns=2)
        assert texts(snapshot.messages) == [
            ("user", ASK),
            ("tool", f"ask_user={STEERED_TOOL_RESULT}"),
            ("user", ASK),
            ("assistant", 'ask_user={"status":"answered","answer":"yes"}'),
        ]
        events = await session.events()
        assert turns_of(events, "interrupt_raised") == ["turn-2"]
        assert turns_of(events, "interrupt_resolved") == ["turn-2"]
        assert await pending_cancellations(session, "call-1") == 0


async def test_a_steer_before_a_durable_wait_starts_rejects_the_call(store: FlowStore) -> None:
    runner = SlowTranscriptRunner(slow_text=WAIT)
    async with session_stack(store, runner, BUILT_INS) as session:
        steered = await steer_while_the_model_asks_for(session, WAIT)
        assert (steered.status, steered.cancellation_reason) == (
            ToolCallStatus.REJECTED,
            CancellationReason.STEERED,
        )
        assert steered.wait_until is None  # never started
        snapshot = await session.idle(turns=2)
        assert texts(snapshot.messages) == [
            ("user", WAIT),
            ("tool", f"durable_wait={STEERED_TOOL_RESULT}"),
            ("user", WAIT),
            (
                "assistant",
                'durable_wait={"status":"completed","waited_seconds":1,"reason":"cool down"}',
            ),
        ]
        assert turns_of(await session.events(), "timer_started") == ["turn-2"]
        assert await pending_cancellations(session, "call-1") == 0


async def test_a_cancellation_an_earlier_turn_left_for_a_tool_call_id_cancels_no_later_call(
    store: FlowStore,
) -> None:
    # A steer wakes a started wait through ToolCallCancellations, keyed by tool call ID
    # only; a cancel_turn that ends the wait before it takes the message leaves it behind.
    runner = TranscriptRunner(tools={"refund": echo})
    async with cancellable_stack(store, runner, BUILT_INS) as session:
        await session.sessions.start_session("s1")
        for tool_call_id in ("call-1", "call-2", "call-3"):
            await cancel_tool_call(session, tool_call_id, CancellationReason.STEERED)
        # The next turn reuses the IDs, and nobody steers or cancels it.
        await session.sessions.send_user_message("s1", f"{ASK} and {WAIT[5:]} and refund {{}}")
        await session.until(
            "the question and the approval", lambda s: len(s.pending_interrupts) == 2
        )
        assert await session.sessions.answer_question("s1", "call-1", "yes")
        assert await session.sessions.resolve_interrupt("s1", "call-3", approved=True)
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == (
            'ask_user={"status":"answered","answer":"yes"}; '
            'durable_wait={"status":"completed","waited_seconds":1,"reason":"cool down"}; '
            "refund=looked up {}"
        )
        assert [(c.tool_call.tool_call_id, c.tool_call.turn_id) for c in runner.tool_calls] == [
            ("call-3", "turn-1")
        ]
        for tool_call_id in ("call-1", "call-2", "call-3"):
            assert await pending_cancellations(session, tool_call_id) == 0  # taken and ignored


REPORT = AgentSessionOptions(tool_policies={"report": ToolPolicy(ToolEffect.READ)})


async def assert_task_abandoned(session: Session, runner: CancellableTaskRunner) -> list[str]:
    """The turn ends cancelled with the task abandoned; returns the Step history's types."""
    snapshot = await session.idle()
    runner.assert_task_abandoned()
    assert texts(snapshot.messages) == [
        ("user", "call report {}"),
        ("tool", f"report={OUTCOME_UNKNOWN_TOOL_RESULT}"),
    ]
    types = [event.type for event in await session.events()]
    assert types.count("turn_cancelled") == 1
    assert types.count("tool_call_finished") == 1
    return [entry.step_type for entry in await session.client.read_step_history("s1")]


async def test_cancel_turn_between_polls_abandons_the_task(store: FlowStore) -> None:
    runner = CancellableTaskRunner(interval=0)
    runner.release.set()
    async with session_stack(store, runner, REPORT) as session:
        await session.sessions.start_session("s1", "call report {}")
        await session.until(
            "the first poll's commit",
            lambda s: any(r.task_poll_interval_seconds == 3600 for r in s.tool_calls),
        )
        assert await session.sessions.cancel_turn("s1", "turn-1")
        history = await assert_task_abandoned(session, runner)
        assert len(runner.polls) == 1
        assert history.count("CancelToolTask") == 1


async def test_a_task_started_after_cancel_turn_is_abandoned_without_a_poll(
    store: FlowStore,
) -> None:
    runner = CancellableTaskRunner()
    async with session_stack(store, runner, REPORT) as session:
        await session.sessions.start_session("s1", "call report {}")
        await asyncio.wait_for(runner.started.wait(), 10)
        assert await session.sessions.cancel_turn("s1", "turn-1")

        async def first_finish() -> str | None:
            history = await session.client.read_step_history("s1")
            finish = "FinishTurnCancellation"
            committed = [e for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
            return next((e.step_type for e in committed if e.step_type == finish), None)

        finished: str = await wait_until("the first FinishTurnCancellation", first_finish)
        assert finished == "FinishTurnCancellation"
        runner.release.set()  # the tool Step ran on, and now starts its task
        history = await assert_task_abandoned(session, runner)
        assert runner.polls == []
        assert history.count("PollToolTask") == 1
        assert history.count("FinishTurnCancellation") == 2
        assert history.count("CancelToolTask") == 1
