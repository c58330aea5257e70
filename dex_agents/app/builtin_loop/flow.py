"""The session Flow of an ``AgentDefinition`` (``builtin_agent_session_flow``)."""

from __future__ import annotations

from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.options import AgentSessionOptions


def builtin_agent_session_options(definition: AgentDefinition) -> AgentSessionOptions:
    """The ``AgentSessionOptions`` an ``AgentDefinition`` implies.

    ``tool_policies`` are each function tool's ``policy()`` with the definition's
    own ``tool_policies`` over them; ``built_in_tools`` gain ``write_todos`` when
    ``plan_mode_enabled``. ``default_tool_effect``, ``interrupt_deadline``,
    ``event_stream_capacity_bytes`` and ``compaction`` are the definition's.
    """
    policies = {tool.name: tool.policy() for tool in definition.tools}
    policies.update(definition.tool_policies)
    return AgentSessionOptions(
        tool_policies=policies,
        default_tool_effect=definition.default_tool_effect,
        built_in_tools=definition.enabled_built_in_tools,
        interrupt_deadline=definition.interrupt_deadline,
        event_stream_capacity_bytes=definition.event_stream_capacity_bytes,
        plan_mode_enabled=definition.plan_mode_enabled,
        compaction=definition.compaction,
    )
