"""What the LiteLLM session tests share: the agent's read tool, the waits, and a turn."""

from __future__ import annotations

from datetime import timedelta

from dex_agents import AgentSessionFlow, ToolEffect
from dex_agents.builtin_loop import function_tool
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.litellm import LiteLLMModelClient
from dex_agents.local import LocalRuntime
from tests.adapters.litellm.provider_server import ProviderServer

FAST = timedelta(milliseconds=20)
WAIT = timedelta(seconds=20)
KEY = "tenant-key-0123456789abcdef"
BEDROCK_CLAUDE = "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"


@function_tool(effect=ToolEffect.READ)
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id} shipped"


def loopback_client(server: ProviderServer, api: str) -> LiteLLMModelClient:
    """A client of ``server`` speaking ``api``: ``responses`` (OpenAI's default),
    ``chat`` (OpenAI Chat Completions), ``anthropic``, ``gemini`` or ``bedrock``
    (Claude on Bedrock's Converse, with the AWS credentials of ``bedrock_env``)."""
    if api == "responses":
        return LiteLLMModelClient(
            "openai/gpt-5-mini", api_base=server.url + "/v1", api_key_provider=lambda: KEY
        )
    if api == "chat":
        return LiteLLMModelClient(
            "openai/gpt-4.1",
            api="chat_completions",
            api_base=server.url + "/v1",
            api_key_provider=lambda: KEY,
        )
    if api == "bedrock":
        return LiteLLMModelClient(BEDROCK_CLAUDE, api_base=server.url)
    model = {"anthropic": "anthropic/claude-sonnet-4-5", "gemini": "gemini/gemini-2.5-pro"}[api]
    return LiteLLMModelClient(model, api_base=server.url, api_key_provider=lambda: KEY)


async def run_turn(runtime: LocalRuntime, flow: AgentSessionFlow, text: str) -> AgentSnapshot:
    """Send ``text`` to session ``s-1`` (opened if new) and wait for the turn to end."""
    sessions = runtime.sessions(flow)
    await sessions.open_session("s-1")
    assert await sessions.send_user_message("s-1", text)
    return await sessions.wait_for_user("s-1", timeout=WAIT)


async def one_turn(flow: AgentSessionFlow, text: str) -> AgentSnapshot:
    """``run_turn`` of ``text`` on an in-memory runtime of its own, closed once the turn ends."""
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        return await run_turn(runtime, flow, text)
