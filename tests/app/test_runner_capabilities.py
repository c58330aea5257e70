"""A session's runner is asked once which optional ports it implements."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.runner_capabilities import RunnerCapabilities
from dex_agents.app.session import SessionRuntime
from dex_agents.ports.session_schema import agent_events_stream


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
