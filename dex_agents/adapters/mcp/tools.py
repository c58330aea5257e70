"""``McpTool``, the call's stored reference, and the policy a call runs with ("Effects").

``recorded_call`` rebuilds a recorded call from its record, for a tool the listing
lacks now.

A listed tool keeps its ``tools/list`` definition, so ``deferred_tool_call`` can
classify it with the session's ``default_tool_effect`` without I/O, and a
``RunModel`` retry builds the same call from the definition it offered.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import attrs

from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.runner_outcomes import DeferredToolCall
from dex_agents.domain.tool_declarations import (
    McpToolEffectClassification,
    classify_mcp_tool_effect,
    effective_mcp_tool_policy,
)
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.runner import AgentTurnContext

logger = logging.getLogger(__name__)

_WRITES = (ToolEffect.IDEMPOTENT_WRITE, ToolEffect.NON_IDEMPOTENT_WRITE, ToolEffect.UNCLASSIFIED)


@attrs.frozen(kw_only=True)
class McpTool(ListedTool):
    """One MCP tool as the source offers it: ``name``, ``description``, ``input_schema``.

    ``server`` is the configured server's name and ``mcp_name`` the tool's name on
    that server. ``definition`` is the tool as ``tools/list`` returned it, with its
    ``annotations`` and ``_meta``. ``effect`` and ``requires_approval`` are the hints
    of the "Effects" table for a session whose default effect is ``unclassified``;
    ``trusts_tool_annotations`` is the server's setting.
    """

    server: str
    mcp_name: str
    definition: Mapping[str, Any] = attrs.field(factory=dict)
    trusts_tool_annotations: bool = True

    def classify(
        self, default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    ) -> McpToolEffectClassification:
        """The tool's effect and default approval for a session with ``default_tool_effect``."""
        return classify_mcp_tool_effect(
            self.definition,
            default_tool_effect=default_tool_effect,
            trusts_tool_annotations=self.trusts_tool_annotations,
        )


def build_mcp_tool(
    name: str, server: str, definition: Mapping[str, Any], *, trusts_tool_annotations: bool
) -> McpTool:
    """The offered tool of one ``tools/list`` entry, logging the classification's warnings."""
    classification = classify_mcp_tool_effect(
        definition, trusts_tool_annotations=trusts_tool_annotations
    )
    for warning in classification.warnings:
        logger.warning("MCP server %r: %s", server, warning)
    schema = definition.get("inputSchema")
    description = definition.get("description")
    known = classification.declared or classification.effect is not ToolEffect.UNCLASSIFIED
    return McpTool(
        name=name,
        description=description if isinstance(description, str) else "",
        input_schema=dict(schema) if isinstance(schema, Mapping) else {"type": "object"},
        effect=classification.effect if known else None,
        requires_approval=classification.requires_approval if known else None,
        server=server,
        mcp_name=str(definition["name"]),
        definition=definition,
        trusts_tool_annotations=trusts_tool_annotations,
    )


def call_policy(
    tool: McpTool, default_tool_effect: ToolEffect, policy: ToolPolicy | None
) -> tuple[ToolPolicy, bool]:
    """The policy a call of ``tool`` runs with, and whether it runs in the model's order.

    A declared write, after the session's policy, runs in order after the turn's
    earlier writes ("Dex MCP conventions").
    """
    classification = tool.classify(default_tool_effect)
    effective = effective_mcp_tool_policy(classification, policy)
    return effective, classification.declared and effective.effect in _WRITES


BUILTIN_REFERENCE_KEY = "builtin"


def server_tool_reference(server: str, tool: str) -> str:
    """The stored reference of a server tool's call: its server and MCP name."""
    return json.dumps({"server": server, "tool": tool}, separators=(",", ":"), sort_keys=True)


def builtin_tool_reference(name: str) -> str:
    """The stored reference of a call of a resource or prompt tool."""
    return json.dumps({BUILTIN_REFERENCE_KEY: name}, separators=(",", ":"))


def decode_reference(text: str | None) -> tuple[str, str] | str:
    """``(server, tool)`` for a server tool's reference, or the name of a resource or prompt tool.

    ``ValueError`` for a reference this source did not write.
    """
    try:
        data: Any = json.loads(text or "")
    except ValueError:
        data = None
    if isinstance(data, dict):
        if isinstance(data.get(BUILTIN_REFERENCE_KEY), str):
            return str(data[BUILTIN_REFERENCE_KEY])
        if isinstance(data.get("server"), str) and isinstance(data.get("tool"), str):
            return data["server"], data["tool"]
    raise ValueError(f"{text!r} is not the reference of an MCP tool call")


def recorded_call(
    turn: AgentTurnContext, tool_call_id: str, tool_name: str, arguments: str
) -> DeferredToolCall | None:
    """The call the turn recorded under ``tool_call_id``, as built; ``None`` when it is not ours."""
    record = turn.tool_calls.get(tool_call_id)
    if record is None or record.tool_name != tool_name:
        return None
    try:
        decode_reference(record.tool_source_reference)
    except ValueError:
        return None
    return DeferredToolCall(
        tool_call_id,
        tool_name,
        arguments,
        ToolPolicy(record.effect, requires_approval=record.requires_approval),
        tool_source_reference=record.tool_source_reference,
        ordered=record.ordered,
    )
