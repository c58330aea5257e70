"""Your first agent: a read tool, a write that needs approval, and a durable session.

The scripted model looks order 7 up, then refunds it; the refund waits for
approval, which this program gives, then it waits for the turn to end and
prints the agent's answer. Run it with ``uv run python examples/first_agent.py``.
The session lives in ``first-agent.sqlite3``; run the program again and it
resumes the same session instead of starting a new one.
"""

from __future__ import annotations

import asyncio

from dex_agents import FlowAlreadyStartedError, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.local import LocalRuntime


@function_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return f"order {order_id} shipped on Monday"


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
def refund_order(order_id: str, amount_cents: int) -> str:
    """Refund part of an order. It moves money, so it waits for approval and runs once."""
    return f"refunded {amount_cents} cents on order {order_id}"


def scripted_model(request: ModelRequest) -> ScriptedModelReply:
    """A stand-in for a real model: look the order up, then refund it, then answer."""
    done = [result.tool_name for result in ScriptedModelClient.tool_results(request)]
    if "lookup_order" not in done:
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "7"}),))
    if "refund_order" not in done:
        refund = {"order_id": "7", "amount_cents": 1500}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("refund_order", refund),))
    outputs = [result.output for result in ScriptedModelClient.tool_results(request)]
    return ScriptedModelReply(text="Done: " + "; ".join(outputs) + ".")


agent = AgentDefinition(
    name="support",
    instructions="You help customers with their orders.",
    model=ScriptedModelClient(scripted_model),
    tools=[lookup_order, refund_order],
)
flow = builtin_agent_session_flow(agent, flow_type="SupportAgent")


async def main() -> None:
    async with LocalRuntime("first-agent.sqlite3", [flow]) as runtime:
        sessions = runtime.sessions(flow)
        try:  # the session and its first message in one commit, so no kill comes between
            await sessions.start_session("customer-7", "Please refund order 7.")
        except FlowAlreadyStartedError:
            print("resumed session customer-7")
        else:
            print("started session customer-7")
        while True:
            snapshot = await sessions.wait_for_user("customer-7")
            if not snapshot.pending_interrupts:
                break
            approval = snapshot.pending_interrupts[0]
            print(f"approving {approval.tool_name} {approval.arguments}")
            await sessions.resolve_interrupt("customer-7", approval.interrupt_id, approved=True)
        print(f"agent: {snapshot.messages[-1].text}")


if __name__ == "__main__":
    asyncio.run(main())
