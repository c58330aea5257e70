"""The agent RPC races are run against: an approval, a question, and an echo.

- ``refund <n>``: the model calls ``refund`` (a non-idempotent write that needs
  approval), which records ``refund <session>`` in the ``InvocationLog`` the Flow
  was built with, then answers ``"done: <result>"``;
- ``ask <n>``: the model asks ``ask_user`` a question, then answers
  ``"done: <result>"``;
- anything else: the model echoes it.

Client processes build the Flow without a log: only the process that runs
the Worker runs the tool.
"""

from __future__ import annotations

from dex_agents import AgentSessionFlow, BuiltInTool, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolCallContext,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.testing import InvocationLog

FLOW_TYPE = "RaceAgent"


def respond(request: ModelRequest) -> ScriptedModelReply:
    """Refund, ask, or echo, by the last user message; then report the result."""
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=f"done: {results[-1].output}")
    last = ScriptedModelClient.user_texts(request)[-1]
    if last.startswith("refund "):
        call = ScriptedToolCall("refund", {"order": last.removeprefix("refund ")})
        return ScriptedModelReply(tool_calls=(call,))
    if last.startswith("ask "):
        question = {"question": f"Which account for {last}?"}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall(BuiltInTool.ASK_USER, question),))
    return ScriptedModelReply(text=f"echo: {last}")


def build_race_flow(log: InvocationLog | None = None) -> AgentSessionFlow:
    """The races' session Flow; ``log`` records each real ``refund`` (the Worker's process)."""

    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
    def refund(order: str, context: ToolCallContext) -> str:
        """Refund an order: it moves money, so it waits for approval and runs once."""
        if log is None:
            raise RuntimeError("this process builds the race Flow without a log: it runs no tool")
        log.record(f"refund {context.flow_id}")
        return f"refunded {order}"

    agent = AgentDefinition(
        name="races",
        instructions="Refund, ask, or echo.",
        model=ScriptedModelClient(respond),
        tools=[refund],
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    return builtin_agent_session_flow(agent, flow_type=FLOW_TYPE)
