"""What the LiteLLM session tests share: the agent's read tool, the waits, and a turn."""

from __future__ import annotations

from datetime import timedelta

from dex_agents import AgentSessionFlow, ToolEffect
from dex_agents.builtin_loop import function_tool
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.local import LocalRuntime

FAST = timedelta(milliseconds=20)
WAIT = timedelta(seconds=20)
KEY = "tenant-key-0123456789abcdef"


@function_tool(effect=ToolEffect.READ)
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id} shipped"


async def run_turn(runtime: LocalRuntime, flow: AgentSessionFlow, text: str) -> AgentSnapshot:
    """Send ``text`` to session ``s-1`` (opened if new) and wait for the turn to end."""
    sessions = runtime.sessions(flow)
    await sessions.open_session("s-1")
    assert await sessions.send_user_message("s-1", text)
    return await sessions.wait_for_user("s-1", timeout=WAIT)
