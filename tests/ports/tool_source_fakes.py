"""Tool source fakes: one with the optional methods, one with only the required members."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.runner_outcomes import (
    DeferredToolCall,
    DeferredToolOutcome,
    ToolExecutionResult,
    ToolTaskPending,
    ToolTaskPollOutcome,
)
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution, ToolTaskPoll


class FakeToolSource:
    """A source with both optional methods: declared tool names and cached tools."""

    source_name = "files"

    def __init__(self) -> None:
        self.listed = (
            ListedTool(name="files__read", description="Read a file.", effect=ToolEffect.READ),
        )

    async def list_tools(self) -> Sequence[ListedTool]:
        return self.listed

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        effect = listed_tool.effect if listed_tool is not None else None
        return DeferredToolCall(
            tool_call_id,
            tool_name,
            arguments,
            turn.resolve_tool_policy(tool_name, effect),
            tool_source_reference=tool_name,
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return ToolExecutionResult(f"read {call.tool_call.tool_source_reference}")

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolTaskPending(poll_interval_seconds=5)

    def declared_tool_names(self) -> Collection[str]:
        return frozenset({"files__read"})

    def cached_tools(self) -> Sequence[ListedTool]:
        return self.listed


class ListingOnlySource:
    """A source with only the five required members."""

    source_name = "tickets"

    async def list_tools(self) -> Sequence[ListedTool]:
        return ()

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        return DeferredToolCall(
            tool_call_id, tool_name, arguments, turn.resolve_tool_policy(tool_name)
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return ToolExecutionResult("ok")

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolExecutionResult("ok")
