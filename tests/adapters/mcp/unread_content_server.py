"""An MCP server whose tool results hold content blocks the MCP SDK's models cannot read.

MCP 2026-07-28 lets a result's content carry a block the SDK's models have no type
for, such as one of an extension (the protocol's own check of the result passes),
but the SDK's client then refuses the whole result. The SDK's server builds results
from those models too, so ``SendAsServed`` puts ``SERVED_CONTENT`` in place of each
``tools/call`` answer's content on the wire. ``read_widget`` is a read,
``write_widget`` an unannotated write, ``failed_widget`` a read answered with
``isError``, and ``linked_note`` a read answered with ``LINK_CONTENT``. Run it under ``http_server.py`` (``HttpTestServer(..., module=__name__)``).
"""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.lowlevel import Server

SERVED_CONTENT: list[dict[str, Any]] = [
    {"type": "text", "text": "the widget"},
    {"type": "widget", "size": 3},
]
"""The content of every widget tool's answer: a text block, then a block of a type no MCP
model knows."""

LINK_CONTENT: list[dict[str, Any]] = [
    {"type": "resource_link", "uri": "note://a", "name": "a", "title": None, "x-owner": "ops"}
]
"""The content of ``linked_note``'s answer: a block the SDK reads, with a ``null`` and a
field of the server's own, which its models leave out."""


class SendAsServed:
    """Server middleware: a ``tools/call`` answer's content is ``SERVED_CONTENT`` (or
    ``LINK_CONTENT``)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        """The wire form ``call_next`` gives; for ``tools/call``, with the content replaced."""
        # The runner sends what its outermost middleware returns without checking it again.
        result = await call_next(ctx)
        if ctx.method != "tools/call" or not isinstance(result, dict):
            return result
        linked = (ctx.params or {}).get("name") == "linked_note"
        served = LINK_CONTENT if linked else SERVED_CONTENT
        return {**result, "content": served}


def build_server() -> Server[Any]:
    """The lowlevel server with the three tools and ``SendAsServed`` outermost."""
    read = types.ToolAnnotations(read_only_hint=True)
    tools = [
        types.Tool(name="read_widget", input_schema={"type": "object"}, annotations=read),
        types.Tool(name="write_widget", input_schema={"type": "object"}),
        types.Tool(name="failed_widget", input_schema={"type": "object"}, annotations=read),
        types.Tool(name="linked_note", input_schema={"type": "object"}, annotations=read),
    ]

    async def list_tools(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        failed = params.name == "failed_widget"
        return types.CallToolResult(content=[], is_error=failed)

    server = Server("dex-unread-content", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.insert(0, SendAsServed())  # outermost
    return server
