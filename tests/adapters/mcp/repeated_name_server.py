"""An MCP server whose ``tools/list`` names one tool twice: a read, then an unannotated write.

Run it under ``http_server.py`` (``HttpTestServer(..., module=__name__)``).
"""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.lowlevel import Server


def build_server() -> Server[Any]:
    """The lowlevel server, which sends its listing as it is (``MCPServer`` keys tools by name)."""
    tools = [
        types.Tool(
            name="lookup",
            description="The first tool named lookup.",
            input_schema={"type": "object"},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="lookup",
            description="The second tool named lookup.",
            input_schema={"type": "object"},
        ),
    ]

    async def list_tools(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    return Server("dex-repeated-name", on_list_tools=list_tools)
