"""The first agent on a real model: LiteLLMModelClient instead of the scripted one.

With ``OPENAI_API_KEY`` set it calls OpenAI (``DEX_AGENTS_MODEL`` picks another
LiteLLM model, e.g. ``anthropic/claude-sonnet-4-5`` with ``ANTHROPIC_API_KEY``).
Without a key, point ``DEX_AGENTS_API_BASE`` at a local OpenAI-compatible server
(vLLM, llama.cpp, Ollama's ``/v1``) and name its model: ``openai/MODEL`` is asked
through the Responses API, ``hosted_vllm/MODEL`` through Chat Completions, the one
API llama.cpp's server speaks. It needs the ``litellm`` extra:
``uv sync --inexact --extra litellm``. Run it with ``uv run python examples/real_model.py``.
"""

from __future__ import annotations

import asyncio
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-map download

from dex_agents import ToolEffect
from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow, function_tool
from dex_agents.litellm import LiteLLMModelClient
from dex_agents.local import LocalRuntime


@function_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return f"order {order_id} shipped on Monday"


def model_client() -> LiteLLMModelClient:
    api_base = os.environ.get("DEX_AGENTS_API_BASE")
    if api_base is None and not os.environ.get("OPENAI_API_KEY"):
        sys.exit("set OPENAI_API_KEY, or DEX_AGENTS_API_BASE for a local OpenAI-compatible server")
    model = os.environ.get("DEX_AGENTS_MODEL", "openai/gpt-5-mini")
    return LiteLLMModelClient(model, api_base=api_base)


agent = AgentDefinition(
    name="support",
    instructions="You help customers with their orders. Look orders up before you answer.",
    model=model_client(),
    tools=[lookup_order],
)
flow = builtin_agent_session_flow(agent, flow_type="RealModelAgent")


async def main() -> None:
    async with LocalRuntime(None, [flow]) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("customer-7")
        await sessions.send_user_message("customer-7", "Where is my order 7?")
        snapshot = await sessions.wait_for_user("customer-7")
        if snapshot.state is not None and snapshot.state.last_turn_error:
            sys.exit(f"the turn failed: {snapshot.state.last_turn_error}")
        print(f"agent: {snapshot.messages[-1].text}")


if __name__ == "__main__":
    asyncio.run(main())
