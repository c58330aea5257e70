"""A scripted agent whose ``hold`` tool blocks until the test releases it, mid-turn.

Its ``list_files`` tool answers ``UNDECODABLE_FILE``, text a session keeps
though it has no UTF-8 form.
"""

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

UNDECODABLE_FILE = "report-\udcff.txt"
"""A file name as ``os.fsdecode`` gives one that is not UTF-8: its last byte a lone surrogate."""


def make_flow(gate: threading.Event, flow_type: str = "UiStreamAgent") -> AgentSessionFlow:
    """An agent that echoes, and for the message "hold" calls ``hold``, which waits on ``gate``.

    For the message "files" it calls ``list_files``, then says "done: " and its result.
    """

    @function_tool(effect=ToolEffect.READ)
    def hold() -> str:
        """Wait until the test releases the turn."""
        if not gate.wait(GATE_DEADLINE_SECONDS):
            raise TimeoutError("the test never released the hold tool")
        return "released"

    @function_tool(effect=ToolEffect.READ)
    def list_files() -> str:
        """List the reports."""
        return UNDECODABLE_FILE

    def reply(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        last = ScriptedModelClient.user_texts(request)[-1]
        if results:
            return ScriptedModelReply(text=f"done: {results[-1].output}")
        if last == "hold":
            return ScriptedModelReply(text="holding", tool_calls=(ScriptedToolCall("hold", {}),))
        if last == "files":
            return ScriptedModelReply(tool_calls=(ScriptedToolCall("list_files", {}),))
        return ScriptedModelReply(text=f"echo: {last}")

    agent = AgentDefinition(
        name="ui-stream-test",
        instructions="Secret instructions the browser must not see.",
        model=ScriptedModelClient(reply),
        tools=[hold, list_files],
    )
    return builtin_agent_session_flow(agent, flow_type=flow_type)
