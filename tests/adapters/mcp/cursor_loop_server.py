"""An MCP stdio server whose ``tools/list`` and ``resources/list`` always name the same next page.

Run it as ``python cursor_loop_server.py``; a client that follows every
``nextCursor`` would list it forever.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

CURSOR = "the-same-page"


def build_server() -> Server[Any]:
    """The lowlevel server: every list page says ``CURSOR`` comes next."""

    async def list_tools(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tool = types.Tool(name="looped", input_schema={"type": "object"})
        return types.ListToolsResult(tools=[tool], next_cursor=CURSOR)

    async def list_resources(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        resource = types.Resource(name="looped", uri="note://looped")
        return types.ListResourcesResult(resources=[resource], next_cursor=CURSOR)

    return Server("dex-cursor-loop", on_list_tools=list_tools, on_list_resources=list_resources)


async def _main() -> None:
    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_main)
