"""The demo support agent of ``dex-agents chat``: fake order tools and a scripted model.

The model is deterministic and needs no key: it answers plain text, and on
keywords calls each kind of tool, so a newcomer sees reads, writes, approvals,
questions and plans on a durable session. ``build_demo_agent(model=...)`` swaps
the model and keeps the tools; ``tool_sources`` adds tools listed at run time,
such as MCP servers' (``chat --mcp-stdio``, ``--mcp-url``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.function_tools import FunctionTool, function_tool
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.model_io import ModelRequest, ToolResultItem
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.ports.model_client import ModelClient
from dex_agents.ports.tool_source import ToolSource

DEMO_AGENT_NAME = "demo-support-agent"
"""The ``AgentDefinition.name`` of the demo agent."""

DEMO_FLOW_TYPE = "DemoSupportAgent"
"""The session Flow type of the demo agent, as ``dex-agents sessions`` lists it."""

DEMO_TOOL_LOG_ENV = "DEX_AGENTS_DEMO_TOOL_LOG"
"""When set, every real demo tool invocation appends one line to the file it names."""

DEMO_INSTRUCTIONS = (
    "You are the support agent of a small shop. Look orders up, update shipping "
    "addresses, and refund orders after the user approves."
)

DEFAULT_REFUND_CENTS = 1500
"""What the demo model refunds when the user names no amount."""

_ORDER_ID = re.compile(r"order\s*#?\s*([A-Za-z0-9-]+)", re.IGNORECASE)
_AMOUNT = re.compile(r"\$\s*(\d+)(?:\.(\d{1,2}))?")


def _log_invocation(line: str) -> None:
    path = os.environ.get(DEMO_TOOL_LOG_ENV)
    if path:
        with Path(path).open("a", encoding="utf-8") as log:
            log.write(line + "\n")


@function_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order's status, total and shipping address."""
    _log_invocation(f"lookup_order {order_id}")
    order = {
        "order_id": order_id,
        "status": "shipped",
        "total_cents": 4200,
        "shipping_address": "1 Demo Street, Springfield",
    }
    return json.dumps(order)


@function_tool(effect=ToolEffect.IDEMPOTENT_WRITE)
def update_shipping_address(order_id: str, address: str) -> str:
    """Set the shipping address of an order (repeating it changes nothing more)."""
    _log_invocation(f"update_shipping_address {order_id} {address}")
    return f"order {order_id} now ships to {address}"


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
def refund_order(order_id: str, amount_cents: int) -> str:
    """Refund part or all of an order; every call moves money, so it waits for approval."""
    _log_invocation(f"refund_order {order_id} {amount_cents}")
    return f"refunded {amount_cents} cents on order {order_id}"


DEMO_TOOLS: tuple[FunctionTool, ...] = (lookup_order, update_shipping_address, refund_order)
"""The demo agent's function tools."""


def _order_id(text: str) -> str:
    match = _ORDER_ID.search(text)
    return match.group(1) if match else "7"


def _amount_cents(text: str) -> int:
    match = _AMOUNT.search(text)
    if match is None:
        return DEFAULT_REFUND_CENTS
    cents = (match.group(2) or "0").ljust(2, "0")
    return int(match.group(1)) * 100 + int(cents)


def _answer_of(result: ToolResultItem) -> str | None:
    try:
        value = json.loads(result.output)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("status") == "answered":
        answer = value.get("answer")
        return answer if isinstance(answer, str) else None
    return None


def _summary(results: tuple[ToolResultItem, ...]) -> str:
    lines = [f"{result.tool_name}: {result.output}" for result in results]
    return "Done. " + "; ".join(lines)


def demo_reply(request: ModelRequest) -> ScriptedModelReply:
    """The demo model: one deterministic reply per model call.

    After tool results it summarizes them, except that an answered ``ask_user``
    about an address leads to ``update_shipping_address``. Otherwise the last
    user message decides: ``refund`` calls ``refund_order`` (approval),
    ``address`` asks for the new address, ``plan`` writes a plan, ``order``
    calls ``lookup_order``, and anything else gets a plain answer.
    """
    user_texts = ScriptedModelClient.user_texts(request)
    last = user_texts[-1] if user_texts else ""
    lowered = last.lower()
    results = ScriptedModelClient.tool_results(request)
    if results:
        latest = results[-1]
        answer = _answer_of(latest)
        if latest.tool_name == BuiltInTool.ASK_USER and answer is not None:
            arguments = {"order_id": _order_id(last), "address": answer}
            return ScriptedModelReply(
                text="Updating the address.",
                tool_calls=(ScriptedToolCall("update_shipping_address", arguments),),
            )
        return ScriptedModelReply(text=_summary(results))
    if "refund" in lowered:
        arguments_refund = {"order_id": _order_id(last), "amount_cents": _amount_cents(last)}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("refund_order", arguments_refund),))
    if "address" in lowered:
        question = f"What is the new shipping address for order {_order_id(last)}?"
        return ScriptedModelReply(
            tool_calls=(ScriptedToolCall(BuiltInTool.ASK_USER, {"question": question}),)
        )
    if "plan" in lowered:
        todos = [
            {"content": f"Look up order {_order_id(last)}", "status": "completed"},
            {"content": "Check the refund policy", "status": "in_progress"},
            {"content": "Reply to the customer", "status": "pending"},
        ]
        return ScriptedModelReply(
            tool_calls=(ScriptedToolCall(BuiltInTool.WRITE_TODOS, {"todos": todos}),)
        )
    if _ORDER_ID.search(last):
        return ScriptedModelReply(
            tool_calls=(ScriptedToolCall("lookup_order", {"order_id": _order_id(last)}),)
        )
    return ScriptedModelReply(
        text=(
            f"Demo reply: {last}. Try 'where is order 7', 'refund order 7', "
            "'change the address of order 7' or 'make a plan'."
        )
    )


def build_demo_agent(
    model: ModelClient | None = None, tool_sources: Sequence[ToolSource] = ()
) -> AgentDefinition:
    """The demo support agent; ``model`` replaces the scripted demo model, and
    ``tool_sources`` offer their tools after the demo tools."""
    return AgentDefinition(
        name=DEMO_AGENT_NAME,
        instructions=DEMO_INSTRUCTIONS,
        model=model if model is not None else ScriptedModelClient(demo_reply),
        tools=DEMO_TOOLS,
        tool_sources=tool_sources,
        built_in_tools=frozenset({BuiltInTool.ASK_USER, BuiltInTool.WRITE_TODOS}),
    )
