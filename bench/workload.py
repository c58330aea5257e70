"""The turn workload every system of ``bench/turns.py`` runs, and the dex-agents Flow of it.

One turn: a user message of about 200 characters; the model calls one read
tool, ``lookup_order``; the model answers with the tool's output. The model is
a script (no network) with the same behaviour on every system: after a user
message it asks for the tool, after a tool result it answers.

``flow`` is importable, so a worker process can serve it:
``dex_agents.local.run_workers(path, [workload.flow])``.
"""

from __future__ import annotations

import json
from typing import Final

from dex_agents import ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)

ORDER_ID: Final = "7"
INSTRUCTIONS: Final = "You help customers with their orders."
FLOW_TYPE: Final = "BenchTurns"


def user_message(turn: int) -> str:
    """The user's message of turn ``turn``: about 200 characters, different on every turn."""
    text = (
        f"Turn {turn:06d}. Hello, I ordered a pair of walking boots last week as order "
        f"{ORDER_ID} and the tracking page has not changed since Monday. Could you look the "
        "order up and tell me where it is now, please?"
    )
    return text.ljust(200, ".")


def order_status(order_id: str) -> str:
    """What the read tool returns for ``order_id``."""
    return f"order {order_id} shipped on Monday and is at the local depot"


def answer(tool_output: str) -> str:
    """The model's final answer after the tool returned ``tool_output``."""
    return f"I looked it up: {tool_output}."


# ---------------------------------------------------------------------------
# dex-agents


@function_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return order_status(order_id)


def scripted_model(request: ModelRequest) -> ScriptedModelReply:
    """Ask for ``lookup_order`` after the user's message, answer after its result."""
    results = ScriptedModelClient.tool_results(request)
    if not results:
        return ScriptedModelReply(
            tool_calls=(ScriptedToolCall("lookup_order", {"order_id": ORDER_ID}),)
        )
    return ScriptedModelReply(text=answer(results[-1].output))


agent = AgentDefinition(
    name="bench",
    instructions=INSTRUCTIONS,
    model=ScriptedModelClient(scripted_model, max_recorded_requests=0),
    tools=[lookup_order],
)
flow = builtin_agent_session_flow(agent, flow_type=FLOW_TYPE)


# ---------------------------------------------------------------------------
# The conversation as plain JSON, the same for every system


def turn_messages(turn: int) -> list[dict[str, object]]:
    """The four messages of turn ``turn`` in a provider-neutral JSON shape."""
    call_id = f"call_{turn}"
    output = order_status(ORDER_ID)
    return [
        {"role": "user", "content": user_message(turn)},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": call_id,
                    "name": "lookup_order",
                    "arguments": json.dumps({"order_id": ORDER_ID}),
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": output},
        {"role": "assistant", "content": answer(output)},
    ]


def conversation_json_bytes(turns: int) -> int:
    """The UTF-8 size of the conversation after ``turns`` turns as one JSON array."""
    messages = [message for turn in range(1, turns + 1) for message in turn_messages(turn)]
    return len(json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode())
