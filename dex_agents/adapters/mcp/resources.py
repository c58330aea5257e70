"""The resource and prompt tools ("Resources and prompts").

Three ``READ`` tools, each taking a configured server's name as ``server``. Outputs
are the server's items as it sent them, in JSON with sorted keys. A server that
offers no resources or prompts lists none. A read resource or a prompt the SDK's
models refuse to read is still given as sent (``read_as_sent``). An MCP error
answer, an answer without its ``contents`` or ``messages``, an unreachable server
and an unconfigured server raise ``ToolExecutionError``. A request that got no answer (the stream closed, the server
exited, the request timed out) raises ``McpToolCallInterruptedError``, a Step
failure, as for a ``read`` tool's call: the tool is a read, so its Step sends the
request again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

from dex_agents.adapters.mcp.config import McpServerConfig
from dex_agents.adapters.mcp.connection import connected
from dex_agents.adapters.mcp.errors import McpConnectionError, McpToolCallInterruptedError
from dex_agents.adapters.mcp.interruptions import is_connection_interruption
from dex_agents.adapters.mcp.paging import RepeatedCursorError, pages
from dex_agents.adapters.mcp.sent_results import SentResults, keep_sent_results, read_as_sent
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.mcp_conventions import mcp_error_text
from dex_agents.domain.mcp_naming import (
    MCP_GET_PROMPT_TOOL_NAME,
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
)
from dex_agents.domain.tool_effects import ToolEffect

RESOURCE_AND_PROMPT_TOOL_NAMES = (
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
    MCP_GET_PROMPT_TOOL_NAME,
)


def resource_and_prompt_tools(server_names: Sequence[str]) -> tuple[ListedTool, ...]:
    """The three tools, with ``server`` an ``enum`` of ``server_names``; none without servers."""
    if not server_names:
        return ()
    server = {"type": "string", "enum": list(server_names), "description": "The MCP server."}

    def schema(properties: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"server": server, **properties},
            "required": ["server", *required],
            "additionalProperties": False,
        }

    return (
        ListedTool(
            name=MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
            description="List an MCP server's resources, resource templates and prompts.",
            input_schema=schema({}, []),
            effect=ToolEffect.READ,
        ),
        ListedTool(
            name=MCP_READ_RESOURCE_TOOL_NAME,
            description="Read one resource of an MCP server by its URI.",
            input_schema=schema({"uri": {"type": "string"}}, ["uri"]),
            effect=ToolEffect.READ,
        ),
        ListedTool(
            name=MCP_GET_PROMPT_TOOL_NAME,
            description="Get one prompt of an MCP server, with its arguments.",
            input_schema=schema(
                {
                    "name": {"type": "string"},
                    "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
                },
                ["name"],
            ),
            effect=ToolEffect.READ,
        ),
    )


async def _pages(
    fetch: Callable[[str | None], Awaitable[Any]], sent: SentResults, key: str
) -> list[Any]:
    items: list[Any] = []
    try:
        async for _ in pages(fetch):
            items.extend(sent.last[key])
    except MCPError as error:
        if error.code != METHOD_NOT_FOUND:
            raise
    return items


async def _list_all(
    client: Client, sent: SentResults, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    caps = client.server_capabilities
    resources: list[Any] = []
    templates: list[Any] = []
    prompts: list[Any] = []
    if caps.resources is not None:
        resources = await _pages(lambda c: client.list_resources(cursor=c), sent, "resources")
        templates = await _pages(
            lambda c: client.list_resource_templates(cursor=c), sent, "resourceTemplates"
        )
    if caps.prompts is not None:
        prompts = await _pages(lambda c: client.list_prompts(cursor=c), sent, "prompts")
    return {"prompts": prompts, "resource_templates": templates, "resources": resources}


def _text(arguments: Mapping[str, Any], key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str):
        raise ToolExecutionError(f"the argument {key!r} must be a string")
    return value


def _items(answer: Mapping[str, Any], key: str, method: str) -> Any:
    # The protocol's check lets a complete result through without its items; the SDK's
    # models refuse it, and read_as_sent gives it as sent.
    if key not in answer:
        raise ToolExecutionError(f"the MCP server's {method} answer has no {key!r}")
    return answer[key]


async def _read(client: Client, sent: SentResults, arguments: Mapping[str, Any]) -> dict[str, Any]:
    answer = await read_as_sent(client.read_resource(_text(arguments, "uri")), sent)
    return {"contents": _items(answer, "contents", "resources/read")}


async def _prompt(
    client: Client, sent: SentResults, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    raw = arguments.get("arguments") or {}
    if not isinstance(raw, Mapping) or not all(isinstance(v, str) for v in raw.values()):
        raise ToolExecutionError("the prompt's arguments must be strings by name")
    answer = await read_as_sent(client.get_prompt(_text(arguments, "name"), dict(raw)), sent)
    messages = _items(answer, "messages", "prompts/get")
    return {"description": answer.get("description"), "messages": messages}


_OPERATIONS = {
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME: _list_all,
    MCP_READ_RESOURCE_TOOL_NAME: _read,
    MCP_GET_PROMPT_TOOL_NAME: _prompt,
}


async def run_resource_or_prompt_tool(
    name: str,
    arguments: Mapping[str, Any],
    servers: Mapping[str, McpServerConfig],
    *,
    connection_timeout: timedelta,
    connection_attempts: int,
) -> str:
    """The JSON output of one call of a resource or prompt tool.

    ``ToolExecutionError`` and ``McpToolCallInterruptedError`` as the module says.
    """
    server_name = _text(arguments, "server")
    config = servers.get(server_name)
    if config is None:
        raise ToolExecutionError(f"MCP server {server_name!r} is not configured")
    try:
        async with connected(
            config, connection_timeout=connection_timeout, connection_attempts=connection_attempts
        ) as client:
            # The outputs are the items as sent, which the SDK's models do not all keep.
            output = await _OPERATIONS[name](client, keep_sent_results(client), arguments)
    except McpConnectionError as error:
        raise ToolExecutionError(str(error)) from error
    except MCPError as error:
        if is_connection_interruption(error):
            # No answer came, so none is recorded; the effect class decides what follows.
            raise McpToolCallInterruptedError(
                f"the MCP {name} request was interrupted: MCP error: {error}"
            ) from error
        raise ToolExecutionError(mcp_error_text(error.code, error.message)) from error
    except RepeatedCursorError as error:
        raise ToolExecutionError(str(error)) from error
    return json.dumps(output, ensure_ascii=False, sort_keys=True)
