"""How ``BuiltinLoopAgentRunner`` offers and routes tool calls.

A model call offers the agent's function tools, its tool sources' listed tools and
the enabled built-in tools (only ``write_todos`` in a planning turn). Each call the
model makes becomes a ``DeferredToolCall`` under the policy of the tool that offered
it, and a deferred call runs in its tool source, by its stored reference, or as the
function tool it names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from dex_agents.app.builtin_loop import source_references, tool_sources
from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.function_tools import ToolCallContext
from dex_agents.app.builtin_loop.tool_results import require_own_images
from dex_agents.domain.builtin_tools import (
    BuiltInTool,
    enabled_built_in_tool,
    enabled_built_in_tool_definitions,
)
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.model_io import ModelToolCall, ModelToolDefinition
from dex_agents.domain.runner_outcomes import (
    DeferredToolCall,
    DeferredToolOutcome,
    ToolExecutionResult,
)
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_effects import UNKNOWN_TOOL_POLICY
from dex_agents.ports.media_store import MediaStore
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.ports.tool_source import ToolSource


def check_own_images(media_store: MediaStore | None, tool_name: str, outcome: object) -> None:
    """Refuse image references of a store other than the runner's, naming the tool."""
    # A tool source given another store than the runner's returns references the
    # runner cannot read: each later turn of the session would fail on them.
    if media_store is not None and isinstance(outcome, ToolExecutionResult) and outcome.images:
        require_own_images(tool_name, outcome.images, media_store.store_uri)


class BuiltinLoopToolCalls:
    """The tool-call methods of ``BuiltinLoopAgentRunner``: ``execute_deferred_tool_call``, and
    the tools a model call offers and the deferred calls its tool calls become."""

    definition: AgentDefinition
    media_store: MediaStore | None
    _sources: Mapping[str, ToolSource]

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the function tool the call names; an unknown name raises ``ToolExecutionError``.

        A call with a tool source's stored reference runs in that source, with its own
        reference on the record; a source name this agent lacks raises ``LookupError``.
        """
        routed = await source_references.execute_source_call(self._sources, call)
        if routed is not None:
            check_own_images(self.media_store, call.tool_call.tool_name, routed)
            return routed
        name = call.tool_call.tool_name
        tool = self.definition.function_tool(name)
        if tool is None:
            raise ToolExecutionError(f"unknown tool {name}")
        context = ToolCallContext.for_call(call, media_store=self.media_store)
        return await tool.invoke(call.tool_call.arguments, context)

    def _deferred(
        self, turn: AgentTurnContext, call: ModelToolCall, listing: tool_sources.SourceToolListing
    ) -> DeferredToolCall:
        name = call.tool_name
        tool = self.definition.function_tool(name)
        listed = listing.find(name)
        if tool is not None:
            policy = turn.resolve_tool_policy(name, tool.effect)
        elif enabled_built_in_tool(name, turn.enabled_built_in_tools) is not None:
            policy = turn.resolve_tool_policy(name)
        elif listed is not None:
            source, listed_tool = listed
            return tool_sources.source_deferred_tool_call(
                turn,
                source,
                listed_tool,
                tool_call_id=call.tool_call_id,
                arguments=call.arguments,
            )
        else:
            policy = UNKNOWN_TOOL_POLICY
        return DeferredToolCall(call.tool_call_id, name, call.arguments, policy)

    def _tools(
        self,
        turn: AgentTurnContext,
        offers_tools: bool,
        listing: tool_sources.SourceToolListing,
    ) -> list[ModelToolDefinition]:
        if not offers_tools:
            return []
        enabled = turn.enabled_built_in_tools
        if turn.interaction_mode is InteractionMode.PLANNING:
            enabled = enabled & {BuiltInTool.WRITE_TODOS}
            function_tools: list[ModelToolDefinition] = []
        else:
            function_tools = [tool.definition() for tool in self.definition.tools]
        built_ins = [
            ModelToolDefinition(
                name=built_in.name.value,
                description=built_in.description,
                parameters_schema=json.loads(json.dumps(built_in.parameters_schema)),
            )
            for built_in in enabled_built_in_tool_definitions(enabled)
        ]
        return function_tools + listing.definitions() + built_ins
