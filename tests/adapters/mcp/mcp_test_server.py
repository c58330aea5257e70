"""The MCP server the MCP adapter tests talk to, over stdio (``python mcp_test_server.py``) or HTTP.

Its tools cover the rows of "What a call does": a read, an annotated idempotent
write, an unannotated write, a Dex-declared write with ``_meta`` keys, results with
the Dex ``outcome`` key, JSON-RPC errors, an image result, progress notifications,
and a tool that kills its own process mid-call. Every call appends one JSON line
(tool, arguments and request ``_meta``) to the file named by ``MCP_TEST_CALL_LOG``,
so a test sees what reached the server across processes.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
DEX_EFFECT = "io.superdurable.dex/effect"
DEX_APPROVAL = "io.superdurable.dex/approval"
DEX_OUTCOME = "io.superdurable.dex/outcome"


def _log(tool: str, ctx: Context, arguments: dict[str, Any]) -> int:
    """Append the call to the call log; return how many calls of ``tool`` came before."""
    path = os.environ.get("MCP_TEST_CALL_LOG")
    if not path:
        return 0
    meta = dict(ctx.request_context.meta or {})
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments, "meta": meta}) + "\n")
    with open(path, encoding="utf-8") as log:
        return sum(1 for line in log if json.loads(line)["tool"] == tool) - 1


def build_server() -> MCPServer:
    server = MCPServer("dex-test")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def read_note(name: str, ctx: Context) -> str:
        """Read a note."""
        _log("read_note", ctx, {"name": name})
        return f"note {name}: hello"

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=True))
    async def set_flag(flag: str, ctx: Context) -> str:
        """Set a flag."""
        _log("set_flag", ctx, {"flag": flag})
        return f"flag {flag} set"

    @server.tool()
    async def send_email(to: str, ctx: Context) -> str:
        """Send an email."""
        _log("send_email", ctx, {"to": to})
        return f"sent to {to}"

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=True),
        meta={DEX_EFFECT: "non_idempotent_write", DEX_APPROVAL: "recommended"},
    )
    async def send_payment(amount: int, ctx: Context) -> str:
        """Send a payment."""
        _log("send_payment", ctx, {"amount": amount})
        return f"paid {amount}"

    @server.tool(meta={DEX_EFFECT: "read"})
    async def declared_read(ctx: Context) -> str:
        """A declared read."""
        _log("declared_read", ctx, {})
        return "declared"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def outcome(kind: str, ctx: Context) -> CallToolResult:
        """Answer with the Dex outcome key ``kind``."""
        _log("outcome", ctx, {"kind": kind})
        return CallToolResult(
            content=[TextContent(type="text", text=f"the provider said {kind}")],
            is_error=True,
            _meta={DEX_OUTCOME: kind},
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def fails(ctx: Context) -> str:
        """An isError result."""
        _log("fails", ctx, {})
        raise ValueError("no such note")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def rpc_error(code: int, ctx: Context) -> str:
        """A JSON-RPC error response."""
        _log("rpc_error", ctx, {"code": code})
        raise MCPError(code, "broken")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def picture(ctx: Context) -> list[TextContent | ImageContent]:
        """A text and an image."""
        _log("picture", ctx, {})
        data = base64.b64encode(PNG).decode()
        return [
            TextContent(type="text", text="a dot:"),
            ImageContent(type="image", data=data, mime_type="image/png"),
        ]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def bad_picture(ctx: Context) -> list[ImageContent]:
        """An image whose base64 is invalid."""
        _log("bad_picture", ctx, {})
        return [ImageContent(type="image", data="%%%not base64", mime_type="image/png")]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def slow_count(ctx: Context) -> str:
        """Report progress twice, then answer."""
        _log("slow_count", ctx, {})
        await ctx.report_progress(1, 2, "halfway")
        await ctx.report_progress(2, 2, "done")
        return "counted"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def crash_once_read(ctx: Context) -> str:
        """Kill the server process on the first call; answer on later ones."""
        if _log("crash_once_read", ctx, {}) == 0:
            os._exit(3)
        return "read after a crash"

    @server.tool()
    async def crash_write(ctx: Context) -> str:
        """Kill the server process on every call."""
        _log("crash_write", ctx, {})
        os._exit(3)

    @server.resource("note://greeting", description="A greeting.", mime_type="text/plain")
    def greeting() -> str:
        return "hello from a resource"

    @server.resource("note://{name}")
    def named_note(name: str) -> str:
        return f"note {name}"

    @server.prompt(description="Greet someone.")
    def greet(name: str) -> str:
        return f"Please greet {name}."

    return server


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--exit":
        sys.exit(1)
    build_server().run("stdio")
