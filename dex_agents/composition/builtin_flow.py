"""``builtin_agent_session_flow``: an ``AgentDefinition`` as an ``AgentSessionFlow``."""

from __future__ import annotations

from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.composition.session_flow import AgentSessionFlow
from dex_agents.ports.media_store import MediaStore


def builtin_agent_session_flow(
    definition: AgentDefinition, *, flow_type: str, media_store: MediaStore | None = None
) -> AgentSessionFlow:
    """``AgentSessionFlow(BuiltinLoopAgentRunner(definition), flow_type=..., options=...)``.

    The options come from ``builtin_agent_session_options(definition)``;
    ``media_store`` is the runner's, for images.
    """
    return AgentSessionFlow(
        BuiltinLoopAgentRunner(definition, media_store=media_store),
        flow_type=flow_type,
        options=builtin_agent_session_options(definition),
    )
