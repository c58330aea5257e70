"""A session's runner is asked once which optional ports it implements, and a turn
whose runner lacks one it needed ends with the messages it stored kept in order."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import attrs

from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.runner_capabilities import RunnerCapabilities
from dex_agents.app.session import SessionRuntime
from dex_agents.app.steps.run_model import NEW_MESSAGES_WITHOUT_BUILDER_ERROR
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, ToolCallsRequested
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext
from dex_agents.ports.session_schema import agent_events_stream
from tests.app.harness import echo, session_stack
from tests.app.scripted_runner import ScriptedRunner


class _PollsTasks:
    async def poll_tool_task(self, poll: Any) -> Any:
        raise NotImplementedError


class _GivesOptions:
    def tool_call_step_options(self, call: Any) -> None:
        return None


def test_each_capability_is_the_runner_when_it_implements_the_port() -> None:
    polls = _PollsTasks()
    capabilities = RunnerCapabilities.of(polls)
    assert capabilities.tool_task_poller is polls
    assert capabilities.tool_call_step_options is None
    assert capabilities.context_compaction is None
    assert capabilities.unfinished_turn_messages is None
    assert RunnerCapabilities.of(_GivesOptions()).tool_call_step_options is not None


def test_a_runtime_checks_its_runner_when_built_and_again_when_it_gets_another() -> None:
    polls: Any = _PollsTasks()  # only its optional ports matter here
    runtime = SessionRuntime(polls, AgentSessionOptions(), agent_events_stream(), "T")
    assert runtime.capabilities.tool_task_poller is polls
    gives: Any = _GivesOptions()
    other = replace(runtime, runner=gives)
    assert other.capabilities.tool_task_poller is None
    assert other.capabilities.tool_call_step_options is gives


class _StoresWithItsCalls(ScriptedRunner):
    """Stores a message with its tool calls, without ``build_unfinished_turn_messages``."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            return attrs.evolve(outcome, new_messages=[self._answer("looking it up")])
        return outcome


async def test_messages_stored_with_calls_by_a_runner_without_the_builder_end_the_turn_in_order(
    store: FlowStore,
) -> None:
    runner = _StoresWithItsCalls(tools={"lookup": echo})
    options = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "call lookup {}")
        failed = await session.idle()
        assert failed.state is not None
        assert failed.state.last_turn_error == NEW_MESSAGES_WITHOUT_BUILDER_ERROR
        assert await session.sessions.send_user_message("s1", "hello")
        snapshot = await session.idle(turns=2)
    assert runner.tool_calls == []  # the turn ended before its calls ran
    assert snapshot.state is not None
    assert snapshot.state.last_sequence == 4
    # The message stored with the calls is numbered before the next turn's.
    assert [(m.sequence, m.text) for m in snapshot.messages] == [
        (1, "call lookup {}"),
        (2, "looking it up"),
        (3, "hello"),
        (4, "echo: hello"),
    ]
