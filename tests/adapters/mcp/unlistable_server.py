"""An MCP server whose ``tools/list`` always fails and whose one tool logs each call.

Run it under ``http_server.py`` (``HttpTestServer(..., module=__name__)``); calls go
to the call log of ``mcp_test_server.py`` (``MCP_TEST_CALL_LOG``).
"""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from tests.adapters.mcp.mcp_test_server import _append


def build_server() -> Server[Any]:
    """The lowlevel server: ``tools/list`` answers an internal error, ``tools/call`` runs."""

    async def list_tools(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        raise MCPError(types.INTERNAL_ERROR, "the tool registry is down")

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        _append(params.name, dict(params.arguments or {}), {})
        return types.CallToolResult(content=[types.TextContent(type="text", text="called")])

    return Server("dex-unlistable", on_list_tools=list_tools, on_call_tool=call_tool)
