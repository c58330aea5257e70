"""A scripted agent whose ``hold`` tool blocks until the test releases it, mid-turn."""

from __future__ import annotations

import threading

from dex_agents import AgentSessionFlow, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)

GATE_DEADLINE_SECONDS = 20.0


def make_flow(gate: threading.Event, flow_type: str = "UiStreamAgent") -> AgentSessionFlow:
    """An agent that echoes, and for the message "hold" calls ``hold``, which waits on ``gate``."""

    @function_tool(effect=ToolEffect.READ)
    def hold() -> str:
        """Wait until the test releases the turn."""
        if not gate.wait(GATE_DEADLINE_SECONDS):
            raise TimeoutError("the test never released the hold tool")
        return "released"

    def reply(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        last = ScriptedModelClient.user_texts(request)[-1]
        if results:
            return ScriptedModelReply(text=f"done: {results[-1].output}")
        if last == "hold":
            return ScriptedModelReply(text="holding", tool_calls=(ScriptedToolCall("hold", {}),))
        return ScriptedModelReply(text=f"echo: {last}")

    agent = AgentDefinition(
        name="ui-stream-test",
        instructions="Secret instructions the browser must not see.",
        model=ScriptedModelClient(reply),
        tools=[hold],
    )
    return builtin_agent_session_flow(agent, flow_type=flow_type)
