"""The agent session Flow on the embedded engine: turns, tool calls, approvals and failures."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.session_events import build_event
from dex_agents.domain.errors import ToolExecutionError, WireFormatError
from dex_agents.domain.events import TextDeltaPayload, TurnStartedPayload
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT, not_run_error
from dex_agents.domain.tool_step_options import ToolCallStepOptions
from dex_agents.domain.usage import AgentUsage
from dex_agents.local import LocalRuntime
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from tests.app.harness import echo, session_stack
from tests.app.scripted_runner import ScriptedRunner, tool_names
from tests.app.turn_control_fakes import FakeStepContext, staged


async def test_a_turn_answers_and_the_session_waits_for_the_next_message(store: FlowStore) -> None:
    async with session_stack(store, ScriptedRunner()) as session:
        await session.sessions.start_session("s1", "hello")
        snapshot = await session.idle()
        assert [(m.sequence, m.role, m.text) for m in snapshot.messages] == [
            (1, MessageRole.USER, "hello"),
            (2, MessageRole.ASSISTANT, "echo: hello"),
        ]
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        assert snapshot.state.active_turn_id is None
        assert snapshot.usage.model_calls == 1
        assert await session.sessions.send_user_message("s1", "again") is True
        snapshot = await session.idle(turns=2)
        assert snapshot.messages[-1].text == "echo: again"
        assert snapshot.messages[-1].turn_id == "turn-2"
        types = [event.type for event in await session.events()]
        assert types == [
            "turn_started",
            "usage_recorded",
            "turn_completed",
            "turn_started",
            "usage_recorded",
            "turn_completed",
        ]


async def test_a_blank_initial_message_starts_no_turn(store: FlowStore) -> None:
    async with session_stack(store, ScriptedRunner()) as session:
        await session.sessions.start_session("s1", "  ")
        snapshot = await session.until("the session to start", lambda s: s if s.state else None)
        assert snapshot.state is not None
        assert snapshot.state.turn_count == 0
        assert await session.sessions.send_user_message("s1", " ") is False


async def test_messages_sent_before_the_session_starts_are_in_its_snapshot() -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TestAgent")
    async with LocalRuntime(None, [flow], workers=0) as runtime:  # StartAgentSession waits
        sessions = runtime.sessions(flow)
        await sessions.start_session("s1", "hello")
        assert await sessions.send_user_message("s1", "queued")
        assert await sessions.steer_user_message("s1", text="steered while no turn runs")
        snapshot = await sessions.get_agent_snapshot("s1")
        assert snapshot.state is None
        assert snapshot.queued_message_count == 2
        assert [m.text for m in snapshot.queued_messages] == [
            "queued",
            "steered while no turn runs",
        ]
        assert snapshot.steered_messages == ()
        first = snapshot.queued_messages[0].message_id
        assert await sessions.delete_queued_message("s1", first)
        snapshot = await sessions.get_agent_snapshot("s1")
        assert [m.text for m in snapshot.queued_messages] == ["steered while no turn runs"]


async def test_read_tool_calls_run_in_parallel_steps_and_the_model_sees_results(
    store: FlowStore,
) -> None:
    runner = ScriptedRunner(tools={"lookup": echo})
    options = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", 'call lookup {"id": 1} and lookup {"id": 2}')
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == (
            'lookup=looked up {"id": 1}; lookup=looked up {"id": 2}'
        )
        assert tool_names(runner.tool_calls) == ["lookup", "lookup"]
        keys = sorted(call.idempotency_key for call in runner.tool_calls)
        assert keys == ["s1/turn-1/call-1", "s1/turn-1/call-2"]
        assert snapshot.tool_calls == ()  # records are deleted when the turn ends
        history = await session.client.read_step_history("s1")
        assert [entry.step_type for entry in history].count("CallTool") == 2


async def test_an_approval_runs_the_write_only_after_it_is_approved(store: FlowStore) -> None:
    runner = ScriptedRunner(tools={"refund": echo})
    options = AgentSessionOptions(
        tool_policies={"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}
    )
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", 'call refund {"order": 7}')
        interrupt = await session.until(
            "a pending approval", lambda s: next(iter(s.pending_interrupts), None)
        )
        assert interrupt.interrupt_id == "call-1"
        assert runner.tool_calls == []
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert [record.status.value for record in snapshot.tool_calls] == ["awaiting_approval"]
        assert await session.sessions.resolve_interrupt("s1", "call-1", approved=True)
        assert not await session.sessions.resolve_interrupt("s1", "call-1", approved=True)
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == 'refund=looked up {"order": 7}'
        assert tool_names(runner.tool_calls) == ["refund"]
        history = await session.client.read_step_history("s1")
        assert "CallSingleAttemptTool" in [entry.step_type for entry in history]


async def test_a_rejected_approval_never_runs_and_the_model_sees_why(store: FlowStore) -> None:
    runner = ScriptedRunner(tools={"refund": echo})
    async with session_stack(store, runner) as session:  # unclassified: approval by default
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.resolve_interrupt(
            "s1", "call-1", approved=False, rejection_message="not today"
        )
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "refund=not today"
        assert runner.tool_calls == []


class _BrokenStepOptionsRunner(ScriptedRunner):
    def tool_call_step_options(self, call: AgentToolCall) -> ToolCallStepOptions | None:
        raise RuntimeError("the step options are broken")


async def test_an_approval_step_that_fails_ends_its_call_not_the_session(
    store: FlowStore,
) -> None:
    # The approved call's tool Step options come from the runner, in AwaitToolApproval;
    # a runner that raises there failed the whole session right after the approval.
    runner = _BrokenStepOptionsRunner(tools={"refund": echo})
    options = AgentSessionOptions(
        tool_policies={"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}
    )
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.resolve_interrupt("s1", "call-1", approved=True)
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == (
            "refund=The tool call failed: "
            + not_run_error("RuntimeError: the step options are broken")
        )
        assert runner.tool_calls == []
        assert (await session.client.describe_flow("s1")).status == "running"
        # The failed Step consumed the approval: the next turn's call-1 waits for its own.
        await session.sessions.send_user_message("s1", "call refund {}")
        await session.until("the next approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.resolve_interrupt(
            "s1", "call-1", approved=False, rejection_message="not this one"
        )
        snapshot = await session.idle(turns=2)
        assert snapshot.messages[-1].text == "refund=not this one"


async def test_a_tool_error_is_recorded_failed_and_shown_to_the_model(store: FlowStore) -> None:
    async def broken(call: DeferredToolExecution) -> str:
        raise ToolExecutionError("no such order")

    runner = ScriptedRunner(tools={"lookup": broken})
    options = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call lookup {}")
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "lookup=The tool call failed: no such order"
        assert len(runner.tool_calls) == 1  # ToolExecutionError is not retried


async def test_a_crashing_read_retries_three_times_then_records_failed(store: FlowStore) -> None:
    async def crashing(call: DeferredToolExecution) -> str:
        raise RuntimeError(f"attempt {call.attempt} crashed")

    runner = ScriptedRunner(tools={"lookup": crashing})
    options = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call lookup {}")
        snapshot = await session.idle()
        assert [call.attempt for call in runner.tool_calls] == [1, 2, 3]
        assert snapshot.messages[-1].text == (
            "lookup=The tool call failed: RuntimeError: attempt 3 crashed"
        )


async def test_a_crashing_single_attempt_write_runs_once_and_records_outcome_unknown(
    store: FlowStore,
) -> None:
    async def crashing(call: DeferredToolExecution) -> str:
        raise RuntimeError("connection reset after the request was sent")

    runner = ScriptedRunner(tools={"pay": crashing})
    options = AgentSessionOptions(
        tool_policies={"pay": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)}
    )
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call pay {}")
        snapshot = await session.idle()
        assert len(runner.tool_calls) == 1
        assert snapshot.messages[-1].text == f"pay={OUTCOME_UNKNOWN_TOOL_RESULT}"


async def test_a_model_that_keeps_failing_fails_the_turn_with_last_turn_error(
    store: FlowStore,
) -> None:
    runner = ScriptedRunner(model_failures=3)
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "hello")
        snapshot = await session.idle()
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == "the scripted model is down"
        assert len(runner.model_calls) == 3
        assert [event.type for event in await session.events()][-1] == "turn_failed"
        # The next turn that completes clears the error.
        await session.sessions.send_user_message("s1", "again")
        snapshot = await session.idle(turns=2)
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None


async def test_a_usage_count_that_is_not_an_int_fails_the_call_and_the_session_stays_readable(
    store: FlowStore,
) -> None:
    class FloatUsageRunner(ScriptedRunner):
        async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
            outcome = await super().run_model_step(turn)
            if turn.turn_id != "turn-1":
                return outcome
            # A framework that reports a token count as 12.0: stored, it would no longer
            # decode as an AgentUsage, so every later read of the session would fail.
            usage = AgentUsage(model_calls=1, input_tokens=12.0)  # type: ignore[arg-type]
            return attrs.evolve(outcome, usage=usage)

    runner = FloatUsageRunner()
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "hello")
        snapshot = await session.idle()
        assert snapshot.state is not None
        assert (
            snapshot.state.last_turn_error
            == "TurnCompleted.usage.input_tokens must be an int, not float"
        )
        assert snapshot.usage == AgentUsage()
        assert [event.type for event in await session.events()][-1] == "turn_failed"
        await session.sessions.send_user_message("s1", "again")
        snapshot = await session.idle(turns=2)
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        assert snapshot.usage == AgentUsage(model_calls=1, input_tokens=10, output_tokens=5)


async def test_a_live_event_of_the_wrong_type_is_dropped_and_the_stream_stays_readable(
    store: FlowStore,
) -> None:
    class SloppyStreamRunner(ScriptedRunner):
        async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
            # A provider chunk without content, and fields that are not strings: once
            # on the Stream, none of them would decode, and every reader would stop there.
            turn.events.write_text_delta(None)  # type: ignore[arg-type]
            turn.events.write_reasoning_delta(7)  # type: ignore[arg-type]
            turn.events.write_event("text_delta", TextDeltaPayload(text=None))  # type: ignore[arg-type]
            turn.events.write_tool_call_started(None, "lookup")  # type: ignore[arg-type]
            turn.events.write_text_delta("kept")
            return await super().run_model_step(turn)

    async with session_stack(store, SloppyStreamRunner()) as session:
        await session.sessions.start_session("s1", "hello")
        await session.idle()
        waited = await session.sessions.wait_for_user("s1", timeout=timedelta(seconds=10))
        assert waited.messages[-1].text == "echo: hello"
        events = await session.events()
        assert [(event.type, event.payload) for event in events[:2]] == [
            ("turn_started", TurnStartedPayload(sequence=1)),
            ("text_delta", TextDeltaPayload(text="kept")),
        ]
        assert [event.type for event in events[2:]] == ["usage_recorded", "turn_completed"]


def test_an_event_payload_that_decodes_as_itself_is_kept_and_others_go_through_the_wire() -> None:
    context = FakeStepContext(staged(None))
    payload = TurnStartedPayload(sequence=3)
    # Every field has the type decoding gives, so a reader decodes this very value.
    assert build_event(context, "turn-1", "turn_started", payload).payload is payload
    assert build_event(context, "turn-1", "turn_started", {"sequence": 3}).payload == payload
    for wrong in (TurnStartedPayload(sequence=3.0), TextDeltaPayload(text=None)):  # type: ignore[arg-type]
        with pytest.raises(WireFormatError):
            build_event(context, "turn-1", "turn_started", wrong)


async def test_a_failed_turn_after_tool_calls_leaves_a_note(store: FlowStore) -> None:
    async def lookup_then_break_the_model(call: DeferredToolExecution) -> str:
        runner.model_failures = 3  # every model call after this tool fails
        return await echo(call)

    runner = ScriptedRunner(tools={"lookup": lookup_then_break_the_model})
    options = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call lookup {}")
        snapshot = await session.idle()
        note = snapshot.messages[-1].text or ""
        assert note.startswith("[Dex] The previous turn failed after these tool calls ran:\n")
        assert "- lookup {} -> succeeded: looked up {}" in note
        assert note.endswith("Do not repeat these tool calls unless the user asks again.")


async def test_messages_page_oldest_first(store: FlowStore) -> None:
    async with session_stack(store, ScriptedRunner()) as session:
        await session.sessions.start_session("s1", "one")
        await session.idle()
        await session.sessions.send_user_message("s1", "two")
        await session.idle(turns=2)
        page = await session.sessions.list_agent_messages("s1", limit=2)
        assert [m.sequence for m in page.messages] == [3, 4]
        assert page.has_more
        older = await session.sessions.list_agent_messages("s1", before_sequence=3, limit=500)
        assert [m.sequence for m in older.messages] == [1, 2]
        assert not older.has_more


async def test_settings_are_replaced_and_copied_per_turn(store: FlowStore) -> None:
    seen: list[object] = []

    class SettingsRunner(ScriptedRunner):
        async def run_model_step(self, turn):  # type: ignore[no-untyped-def]
            seen.append(dict(turn.session_settings))
            return await super().run_model_step(turn)

    async with session_stack(store, SettingsRunner()) as session:
        await session.sessions.start_session("s1", "hi", session_settings={"model": "a"})
        await session.idle()
        assert await session.sessions.update_session_settings("s1", {"model": "b"})
        assert not await session.sessions.update_session_settings("s1", None)
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.session_settings == {"model": "b"}
        await session.sessions.send_user_message("s1", "again")
        await session.idle(turns=2)
        assert seen == [{"model": "a"}, {"model": "b"}]
