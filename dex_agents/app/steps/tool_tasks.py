"""Tool questions and tool tasks: ``AwaitQuestionAnswer`` for a tool's question, ``PollToolTask``."""

from __future__ import annotations

from typing import Any

from dex_agents.app.session import SessionRuntime
from dex_agents.domain.runner_outcomes import ToolInputRequested, ToolTaskStarted
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.ports.engine import Step, StepContext, StepDecision


class UnsupportedToolOutcomeError(NotImplementedError):
    """A tool outcome this release of the session does not handle yet."""


def continue_after(
    context: StepContext,
    runtime: SessionRuntime,
    record: AgentToolCall,
    outcome: ToolInputRequested | ToolTaskStarted,
) -> StepDecision:
    """Hand a call whose tool asked a question or started a task to the Step that waits for it."""
    raise UnsupportedToolOutcomeError(f"{type(outcome).__name__} is not handled yet")


def steps(runtime: SessionRuntime) -> list[Step[Any]]:
    """The Steps of tool questions and tool tasks."""
    return []
