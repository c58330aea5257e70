"""Tool definitions and the tool choice, as each API takes them.

No tools means neither ``tools`` nor ``tool_choice`` is sent, because some
providers refuse a tool choice without tools. Function tools on the Responses
API are sent with ``strict`` ``false``: the Responses API would otherwise make
them strict, which refuses most JSON Schemas that ``@function_tool`` derives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents.domain.model_io import ModelToolChoice, ModelToolDefinition
from dex_agents.domain.object_memo import ObjectMemo


def plain_json(value: Any) -> Any:
    """``value`` with every mapping a ``dict`` and every tuple a ``list``, for the wire."""
    if isinstance(value, Mapping):
        return {str(key): plain_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(item) for item in value]
    return value


_SCHEMA_TEXTS: ObjectMemo[ModelToolDefinition, str] = ObjectMemo()


def schema_text(tool: ModelToolDefinition) -> str:
    """The compact JSON text of ``tool``'s parameters schema, made once per definition object.

    Raises ``ValueError``, naming the tool, for a schema that is not JSON.

    A source offers the same definitions to every model call until it lists
    again (``model_tool_definition``), and walking each schema into plain JSON
    in every call cost about 13 us a tool, four times parsing its text. The
    text is kept while its definition object lives.
    """
    return _SCHEMA_TEXTS.get(tool, _plain_schema_text)


def _plain_schema_text(tool: ModelToolDefinition) -> str:
    # A hand-written schema may hold a set, an Enum member or NaN: without this
    # check the call failed with json's words and no tool name, or NaN reached
    # the HTTP client, whose refusal read as a retryable HTTP 500.
    try:
        plain = plain_json(tool.parameters_schema)
        return json.dumps(plain, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise ValueError(
            f"the parameters schema of tool {tool.name!r} is not JSON: {error}"
        ) from error


def _schema(tool: ModelToolDefinition) -> dict[str, Any]:
    # Parsed anew for every call: LiteLLM changes the tools it is given in place.
    schema: dict[str, Any] = json.loads(schema_text(tool))
    return schema if schema else {"type": "object", "properties": {}}


def responses_tools(tools: Sequence[ModelToolDefinition]) -> list[dict[str, Any]]:
    """Responses API function tools."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": _schema(tool),
            "strict": False,
        }
        for tool in tools
    ]


def chat_tools(tools: Sequence[ModelToolDefinition]) -> list[dict[str, Any]]:
    """Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": _schema(tool),
            },
        }
        for tool in tools
    ]


def tool_arguments(tools: list[dict[str, Any]], choice: ModelToolChoice) -> dict[str, Any]:
    """``tools`` and ``tool_choice`` (``"auto"``, ``"required"`` or ``"none"``), or nothing."""
    if not tools:
        return {}
    return {"tools": tools, "tool_choice": choice.value}
