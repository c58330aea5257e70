"""Steering and turn cancellation on the embedded engine, and the RPCs and Steps behind them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.attention import SessionAttention, last_turn_cancelled, session_attention
from dex_agents.domain.events import (
    AgentEvent,
    InterruptResolvedPayload,
    TurnCancelledPayload,
    TurnSteeredPayload,
)
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, TurnContinued
from dex_agents.domain.tool_calls import CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_outcomes import (
    STEERED_TOOL_RESULT,
    TURN_CANCELLED_TOOL_RESULT,
)
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.ports.session_schema import TURN_CANCELLATION_REQUEST
from tests.app.harness import echo, session_stack
from tests.app.scripted_runner import ScriptedRunner
from tests.app.steering_support import SlowModelRunner, TranscriptRunner, texts

READ_LOOKUP = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})


def note(*lines: str) -> str:
    """The note a steered or cancelled turn of a runner without a transcript builder stores."""
    return "\n".join(
        (
            "[Dex] The previous turn failed after these tool calls ran:",
            *lines,
            "Do not repeat these tool calls unless the user asks again.",
        )
    )


def of_type(events: list[AgentEvent], event_type: str) -> list[object]:
    return [event.payload for event in events if event.type == event_type]


@dataclass
class ThinkingRunner(TranscriptRunner):
    """Continues a ``think`` turn with ``TurnContinued`` once ``release`` is set."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        last = next((m.text for m in reversed(turn.messages) if m.role is MessageRole.USER), "")
        if last == "think" and not turn.is_resuming:
            self.model_calls.append(turn)
            self.entered.set()
            await self.release.wait()
            thinking = self._answer("thinking")
            return TurnContinued("thinking", [thinking], AgentUsage(model_calls=1))
        return await super().run_model_step(turn)


async def test_steering_with_text_cancels_a_waiting_approval_and_starts_a_turn_with_it(
    store: FlowStore,
) -> None:
    runner = TranscriptRunner(tools={"refund": echo})
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.steer_user_message("s1", text="use staging instead")
        snapshot = await session.idle(turns=2)
        assert texts(snapshot.messages) == [
            ("user", "call refund {}"),
            ("tool", f"refund={STEERED_TOOL_RESULT}"),
            ("user", "use staging instead"),
            ("assistant", "echo: use staging instead"),
        ]
        (records,) = runner.unfinished
        assert records["call-1"].status is ToolCallStatus.REJECTED
        assert records["call-1"].cancellation_reason is CancellationReason.STEERED
        assert runner.tool_calls == []
        # The next model call sees the cancelled result, and the steered text as the turn's.
        assert runner.model_calls[-1].turn_id == "turn-2"
        assert [m.text for m in runner.model_calls[-1].messages][1] == (
            'refund={"status":"cancelled","reason":"superseded_by_steered_user_message"}'
        )
        events = await session.events()
        assert [event.type for event in events] == [
            "turn_started",
            "usage_recorded",
            "tool_call_deferred",
            "interrupt_raised",
            "interrupt_resolved",
            "tool_call_finished",
            "turn_steered",
            "turn_started",
            "usage_recorded",
            "turn_completed",
        ]
        (resolved,) = of_type(events, "interrupt_resolved")
        assert isinstance(resolved, InterruptResolvedPayload)
        assert resolved.cancellation_reason is CancellationReason.STEERED
        assert of_type(events, "turn_steered") == [
            TurnSteeredPayload(steered_message_count=1, message_count=2)
        ]
        assert snapshot.pending_interrupts == ()
        assert snapshot.steered_messages == ()


async def test_a_runner_without_a_transcript_builder_stores_a_note_of_the_steered_calls(
    store: FlowStore,
) -> None:
    runner = ScriptedRunner(tools={"refund": echo})
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.steer_user_message("s1", text="never mind")
        snapshot = await session.idle(turns=2)
        expected_note = note(f"- refund {{}} -> rejected: {STEERED_TOOL_RESULT}")
        assert texts(snapshot.messages) == [
            ("user", "call refund {}"),
            ("user", expected_note),
            ("user", "never mind"),
            ("assistant", "echo: never mind"),
        ]
        assert expected_note in [m.text for m in runner.model_calls[-1].messages]
        # Answering the approval the steer removed changes nothing.
        assert not await session.sessions.resolve_interrupt("s1", "call-1", approved=True)


async def test_steering_a_queued_message_by_id_moves_it_into_the_next_turn(
    store: FlowStore,
) -> None:
    runner = ScriptedRunner(tools={"refund": echo})
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.send_user_message("s1", "second")
        queued = await session.until(
            "a queued message", lambda s: next(iter(s.queued_messages), None)
        )
        assert queued.text == "second"
        assert await session.sessions.steer_user_message("s1", message_id=queued.message_id)
        assert not await session.sessions.steer_user_message("s1", message_id=queued.message_id)
        snapshot = await session.idle(turns=2)
        assert [m.text for m in snapshot.messages if m.turn_id == "turn-2"] == [
            "second",
            "echo: second",
        ]
        assert snapshot.queued_messages == ()
        assert snapshot.state is not None
        assert snapshot.state.turn_count == 2


async def test_a_deleted_queued_message_never_runs(store: FlowStore) -> None:
    runner = ScriptedRunner(tools={"refund": echo})
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.send_user_message("s1", "later")
        snapshot = await session.sessions.get_agent_snapshot("s1")
        (queued,) = snapshot.queued_messages
        assert await session.sessions.delete_queued_message("s1", queued.message_id) is True
        assert await session.sessions.delete_queued_message("s1", queued.message_id) is False
        assert await session.sessions.resolve_interrupt("s1", "call-1", approved=True)
        snapshot = await session.idle()
        assert snapshot.queued_messages == ()
        assert snapshot.state is not None
        assert snapshot.state.turn_count == 1


async def test_steering_while_no_turn_is_active_queues_the_text(store: FlowStore) -> None:
    async with session_stack(store, ScriptedRunner()) as session:
        await session.sessions.start_session("s1")
        await session.until("the session to start", lambda s: s.state)
        assert not await session.sessions.steer_user_message("s1")
        assert not await session.sessions.steer_user_message("s1", message_id="m", text="both")
        assert not await session.sessions.steer_user_message("s1", text="  ")
        assert await session.sessions.steer_user_message("s1", text="hi")
        snapshot = await session.idle()
        assert texts(snapshot.messages) == [("user", "hi"), ("assistant", "echo: hi")]
        types = [event.type for event in await session.events()]
        assert types == ["turn_started", "usage_recorded", "turn_completed"]


async def test_cancel_turn_cancels_a_running_model_call_and_ends_the_turn(
    store: FlowStore,
) -> None:
    runner = SlowModelRunner()
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "slow")
        await asyncio.wait_for(runner.entered.wait(), 10)
        assert await session.sessions.cancel_turn("s1", "turn-9") is False
        assert await session.sessions.cancel_turn("s1", "turn-1") is True
        await asyncio.wait_for(runner.cancelled.wait(), 10)
        snapshot = await session.idle()
        assert texts(snapshot.messages) == [("user", "slow")]
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is None
        assert snapshot.state.last_turn_error is None
        assert snapshot.usage.model_calls == 0  # the dropped call reported nothing
        events = await session.events()
        assert [event.type for event in events] == ["turn_started", "turn_cancelled"]
        assert of_type(events, "turn_cancelled") == [TurnCancelledPayload(message_count=1)]
        assert await session.sessions.cancel_turn("s1", "turn-1") is False  # no turn is active
        assert await session.sessions.send_user_message("s1", "hello")
        snapshot = await session.idle(turns=2)
        assert snapshot.messages[-1].text == "echo: hello"


async def test_a_turn_cancelled_after_a_failed_one_leaves_the_session_idle_not_failed(
    store: FlowStore,
) -> None:
    # Before, the cancelled turn kept the failed turn's last_turn_error and so read as
    # turn_failed: `dex-agents sessions` said "its last turn failed" and chat printed
    # the old failure again after Stop.
    runner = SlowModelRunner()
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "fail")
        snapshot = await session.idle()
        assert session_attention(snapshot) is SessionAttention.TURN_FAILED
        assert await session.sessions.send_user_message("s1", "slow")
        await asyncio.wait_for(runner.entered.wait(), 10)
        assert await session.sessions.cancel_turn("s1", "turn-2")
        snapshot = await session.idle(turns=2)
        assert snapshot.state is not None
        # Only a completed turn clears the error; the cancelled turn did not fail.
        assert snapshot.state.last_turn_error == "the scripted model cannot answer 'fail'"
        assert session_attention(snapshot) is SessionAttention.IDLE
        assert session_attention(await session.sessions.wait_for_user("s1")) is (
            SessionAttention.IDLE
        )


async def test_the_state_says_the_newest_turn_was_cancelled_until_another_turn_ends(
    store: FlowStore,
) -> None:
    # Before, only the turn_cancelled event said it: `dex-agents sessions`, which reads
    # states alone, listed a cancelled turn's session as after a completed turn.
    runner = SlowModelRunner()
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "slow")
        await asyncio.wait_for(runner.entered.wait(), 10)
        assert await session.sessions.cancel_turn("s1", "turn-1")
        snapshot = await session.idle()
        assert snapshot.state is not None
        assert snapshot.state.cancelled_turn_id == "turn-1"
        assert last_turn_cancelled(snapshot.state)
        assert session_attention(snapshot) is SessionAttention.IDLE  # the rule is unchanged
        assert await session.sessions.send_user_message("s1", "hello")
        snapshot = await session.idle(turns=2)
        assert snapshot.state is not None
        assert not last_turn_cancelled(snapshot.state)


async def test_cancel_turn_lets_a_started_tool_finish_and_a_second_cancel_changes_nothing(
    store: FlowStore,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_lookup(call: DeferredToolExecution) -> str:
        started.set()
        await release.wait()
        return "found it"

    runner = ScriptedRunner(tools={"lookup": slow_lookup})
    async with session_stack(store, runner, READ_LOOKUP) as session:
        await session.sessions.start_session("s1", "call lookup {}")
        await asyncio.wait_for(started.wait(), 10)
        assert await session.sessions.cancel_turn("s1", "turn-1") is True
        first = await session.client.read_attribute("s1", TURN_CANCELLATION_REQUEST)
        assert first is not None
        assert first.turn_id == "turn-1"
        assert await session.sessions.cancel_turn("s1", "turn-1") is True
        assert await session.client.read_attribute("s1", TURN_CANCELLATION_REQUEST) == first
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id == "turn-1"
        release.set()
        snapshot = await session.idle()
        assert texts(snapshot.messages) == [
            ("user", "call lookup {}"),
            ("user", note("- lookup {} -> succeeded: found it")),
        ]
        types = [event.type for event in await session.events()]
        assert types.count("turn_cancelled") == 1
        assert "turn_completed" not in types
        history = [entry.step_type for entry in await session.client.read_step_history("s1")]
        assert history.count("FinishTurnCancellation") == 1
        assert len(runner.model_calls) == 1


async def test_cancel_turn_rejects_a_waiting_approval(store: FlowStore) -> None:
    runner = ScriptedRunner(tools={"refund": echo})
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.cancel_turn("s1", "turn-1")
        snapshot = await session.idle()
        assert texts(snapshot.messages) == [
            ("user", "call refund {}"),
            ("user", note(f"- refund {{}} -> rejected: {TURN_CANCELLED_TOOL_RESULT}")),
        ]
        assert not await session.sessions.resolve_interrupt("s1", "call-1", approved=True)
        assert runner.tool_calls == []
        events = await session.events()
        (resolved,) = of_type(events, "interrupt_resolved")
        assert isinstance(resolved, InterruptResolvedPayload)
        assert resolved.cancellation_reason is CancellationReason.TURN_CANCELLED
        assert of_type(events, "turn_cancelled") == [TurnCancelledPayload(message_count=2)]
        assert snapshot.pending_interrupts == ()


async def test_a_model_call_running_when_steered_still_completes_its_turn(
    store: FlowStore,
) -> None:
    runner = SlowModelRunner()
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "slow")
        await asyncio.wait_for(runner.entered.wait(), 10)
        assert await session.sessions.steer_user_message("s1", text="next")
        runner.release.set()
        snapshot = await session.idle(turns=2)
        assert texts(snapshot.messages) == [
            ("user", "slow"),
            ("assistant", "echo: slow"),
            ("user", "next"),
            ("assistant", "echo: next"),
        ]
        types = [event.type for event in await session.events()]
        assert types.count("turn_completed") == 2
        assert "turn_steered" not in types


async def test_a_call_the_model_requested_while_steered_is_cancelled_before_its_tool_runs(
    store: FlowStore,
) -> None:
    runner = SlowModelRunner(tools={"lookup": echo}, slow_text="call lookup {}")
    async with session_stack(store, runner, READ_LOOKUP) as session:
        await session.sessions.start_session("s1", "call lookup {}")
        await asyncio.wait_for(runner.entered.wait(), 10)
        assert await session.sessions.steer_user_message("s1", text="hello")
        runner.release.set()
        snapshot = await session.idle(turns=2)
        assert texts(snapshot.messages) == [
            ("user", "call lookup {}"),
            ("user", note(f"- lookup {{}} -> rejected: {STEERED_TOOL_RESULT}")),
            ("user", "hello"),
            ("assistant", "echo: hello"),
        ]
        assert runner.tool_calls == []
        types = [event.type for event in await session.events()]
        assert "tool_call_started" not in types
        assert types.count("turn_steered") == 1


async def test_a_turn_steered_between_model_calls_ends_without_another_model_call(
    store: FlowStore,
) -> None:
    runner = ThinkingRunner()
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "think")
        await asyncio.wait_for(runner.entered.wait(), 10)
        assert await session.sessions.steer_user_message("s1", text="next")
        runner.release.set()
        snapshot = await session.idle(turns=2)
        assert texts(snapshot.messages) == [
            ("user", "think"),
            ("assistant", "thinking"),
            ("user", "next"),
            ("assistant", "echo: next"),
        ]
        assert [call.turn_id for call in runner.model_calls] == ["turn-1", "turn-2"]
        assert runner.unfinished == [{}]
        events = await session.events()
        assert of_type(events, "turn_steered") == [
            TurnSteeredPayload(steered_message_count=1, message_count=2)
        ]
