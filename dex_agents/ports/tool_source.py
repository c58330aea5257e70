"""Tool sources: tools listed at run time, such as an MCP server's tools ("Tool sources")."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.runner_outcomes import (
    DeferredToolCall,
    DeferredToolOutcome,
    ToolTaskPollOutcome,
)
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution, ToolTaskPoll


@runtime_checkable
class ToolSource(Protocol):
    """Any object with these members is a tool source; ``McpToolSource`` is one.

    Contract:

    - ``source_name`` is unique among an agent's sources and stable across
      deploys: the runner stores it with each call's reference, as
      ``{"stepwise_tool_source": <source_name>, "reference": ...}``, so the tool
      Step and ``PollToolTask`` reach the source that built the call on any Worker,
      without a listing.
    - ``list_tools`` may do I/O; the runner awaits it in every ``RunModel`` of a
      chat or executing turn for at most ``tool_source_listing_timeout`` and
      offers nothing from a source whose listing raises or takes longer.
    - ``deferred_tool_call`` is synchronous and deterministic, so a ``RunModel``
      retry builds the same call. It applies the source's policy, effect and
      ``tool_source_reference``, and keeps the ``tool_call_id`` and ``tool_name``
      it is given (another fails the ``RunModel`` attempt). The runner passes the definition it offered as
      ``listed_tool``, so a listing refreshed meanwhile cannot change the call.
      A framework adapter's router rebuilds a recorded call of a tool the live
      listing lacks with ``listed_tool=None``; ``turn.tool_calls`` then holds its
      record with the source's own reference, so the source can rebuild it as built.
    - ``execute_deferred_tool_call`` and ``poll_tool_task`` keep the runner
      contract of the same names (idempotency key, heartbeats, tool tasks). They
      may run concurrently with themselves.
    - A source may also implement ``ToolCallStepOptionsProvider`` and
      ``ToolTaskCanceller``; the runner routes those calls to it.
    """

    @property
    def source_name(self) -> str:
        """The source's unique, stable name."""
        ...

    async def list_tools(self) -> Sequence[ListedTool]:
        """The tools the source offers now."""
        ...

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        """Build the deferred call of one of the source's tools; ``arguments`` is JSON text."""
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one call that this source built, in its tool Step."""
        ...

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll a task that one of this source's calls started."""
        ...


@runtime_checkable
class DeclaredToolNamesSource(Protocol):
    """Optional: a source's names that it always lists, checked when an agent is built."""

    def declared_tool_names(self) -> Collection[str]:
        """The names every listing of this source includes; no I/O."""
        ...


@runtime_checkable
class CachedToolsSource(Protocol):
    """Optional: a source's last listing without I/O, for ``estimate_input_tokens``.

    Without it, the estimate counts the runner's last listing of the source.
    """

    def cached_tools(self) -> Sequence[ListedTool]:
        """The source's last listing, empty before its first; no I/O."""
        ...
