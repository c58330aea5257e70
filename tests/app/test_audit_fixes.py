"""Behaviours a spec audit of the session found missing, each pinned end to end."""

from __future__ import annotations

from typing import Any

from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    DeferredToolCall,
    ToolCallsRequested,
)
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from tests.app.harness import session_stack
from tests.app.scripted_runner import ScriptedRunner

BUILT_INS = AgentSessionOptions(
    built_in_tools=frozenset({BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT})
)


async def test_a_built_in_call_with_invalid_arguments_fails_in_run_models_own_commit(
    store: FlowStore,
) -> None:
    async with session_stack(store, ScriptedRunner(), BUILT_INS) as session:
        await session.sessions.start_session(
            "s1", 'call ask_user {} and durable_wait {"duration_seconds": 0, "reason": "x"}'
        )
        snapshot = await session.idle()
        answer = snapshot.messages[-1].text or ""
        assert answer.startswith("ask_user=The tool call failed: invalid ask_user arguments: ")
        assert "; durable_wait=The tool call failed: invalid durable_wait arguments: " in answer
        history = await session.client.read_step_history("s1")
        # Neither call reached a Step of its own: both settled with the model call.
        assert {entry.step_type for entry in history} == {
            "StartAgentSession",
            "RunModel",
            "ResumeTurn",
        }


async def test_a_steered_turn_keeps_the_last_turn_error_of_an_earlier_turn(
    store: FlowStore,
) -> None:
    runner = ScriptedRunner(model_failures=3)
    async with session_stack(store, runner, BUILT_INS) as session:
        await session.sessions.start_session("s1", "hello")
        snapshot = await session.idle()
        assert snapshot.state is not None
        error = snapshot.state.last_turn_error
        assert error == "the scripted model is down"
        # A turn that waits on a question, then is steered: it neither completes nor fails.
        await session.sessions.send_user_message("s1", 'call ask_user {"question": "Which?"}')
        await session.until("the question", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.steer_user_message(
            "s1", text='call ask_user {"question": "And now?"}'
        )

        def third_turn_waits(snapshot: AgentSnapshot) -> AgentSnapshot | None:
            state = snapshot.state
            waiting = state is not None and state.turn_count == 3 and snapshot.pending_interrupts
            return snapshot if waiting else None

        # The steered turn has ended; the next one waits on its question, so nothing
        # has completed since the failed turn.
        snapshot = await session.until("the steered messages' turn", third_turn_waits)
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == error


async def test_a_tool_result_that_is_not_text_fails_the_call_and_the_session_stays_readable(
    store: FlowStore,
) -> None:
    # Before, ToolExecutionResult(5) was stored as the record's output, a record that does
    # not decode: every later snapshot, and the turn itself, failed with StoredValueError.
    async def count(call: DeferredToolExecution) -> str:
        return 5  # type: ignore[return-value]

    policy = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    options = AgentSessionOptions(tool_policies={"count": policy})
    async with session_stack(store, ScriptedRunner(tools={"count": count}), options) as session:
        await session.sessions.start_session("s1", "call count {}")
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == (
            "count=The outcome of this tool call is unknown: it may or may not have taken "
            "effect. Do not call it again blindly; check whether it took effect first, or ask "
            "the user."
        )
        assert await session.sessions.send_user_message("s1", "hello")
        snapshot = await session.idle(turns=2)
        assert snapshot.messages[-1].text == "echo: hello"


class DecodedArgumentsRunner(ScriptedRunner):
    """Hands its tool call's arguments over decoded, not as the JSON text the contract asks."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.is_resuming:
            return await super().run_model_step(turn)
        arguments: Any = {"order_id": "7"}
        call = DeferredToolCall("call-1", "refund", arguments, turn.resolve_tool_policy("refund"))
        return ToolCallsRequested("state", [call], AgentUsage())


async def test_tool_call_arguments_that_are_not_text_fail_the_turn_and_the_session_stays_readable(
    store: FlowStore,
) -> None:
    # Before, the arguments were stored on the call's record and its approval interrupt,
    # which then did not decode: every later snapshot failed with StoredValueError.
    async with session_stack(store, DecodedArgumentsRunner()) as session:
        await session.sessions.start_session("s1", "refund order 7")
        snapshot = await session.idle()
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == (
            "DeferredToolCall: arguments must be JSON text (a str), not dict ({'order_id': '7'})"
        )
        assert snapshot.pending_interrupts == ()
