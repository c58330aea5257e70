"""An MCP server that serves the cases of ``conformance/mcp_dex_conventions.json`` as tools.

Case ``n`` of the file is the tool ``case_<n>``: for a ``classify_tool`` or
``tool_policy`` case, ``tools/list`` returns the case's tool definition as it is
(under that name); for a ``result`` or ``error`` case, ``tools/call`` answers
with the case's result or JSON-RPC error as it is, except that an image's bytes
are a real PNG (the cases' data is a PNG signature only, which a media store
refuses; the text a case expects does not depend on them). The SDK's server
validates a listing before it sends it, which would turn a string hint
(``"readOnlyHint": "true"``) into ``true`` and drop a ``null`` in ``_meta``;
``SendAsDefined`` puts each definition's ``annotations`` and ``_meta`` back as
the case has them. So the cases reach
``McpToolSource`` through the MCP SDK on the wire, as a real server's would.
Run it under ``http_server.py`` (``HttpTestServer(..., module=__name__)``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp import types
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

CASES_FILE = Path(__file__).resolve().parents[3] / "conformance" / "mcp_dex_conventions.json"
# A 1x1 PNG.
PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
DEFINITION_OPS = frozenset({"classify_tool", "tool_policy"})
ANSWER_OPS = frozenset({"result", "error"})


def cases() -> list[dict[str, Any]]:
    """The file's cases, in order; case ``n`` is the tool ``case_<n>``."""
    loaded: list[dict[str, Any]] = json.loads(CASES_FILE.read_text(encoding="utf-8"))["cases"]
    return loaded


def tool_name(index: int) -> str:
    """The server's name of the tool of case ``index``."""
    return f"case_{index}"


def _with_real_images(result: dict[str, Any]) -> dict[str, Any]:
    content = [
        {**block, "data": PNG_BASE64} if block.get("type") == "image" else block
        for block in result.get("content", [])
    ]
    return {**result, "content": content}


def _definition(index: int, case_input: dict[str, Any]) -> dict[str, Any]:
    if case_input["op"] in DEFINITION_OPS:
        return {**case_input["tool"], "name": tool_name(index)}
    # A read, so that a Step failure is retried and the answer alone decides.
    return {
        "name": tool_name(index),
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    }


SENT_AS_DEFINED = ("annotations", "_meta")


class SendAsDefined:
    """Server middleware: each listed tool's ``SENT_AS_DEFINED`` keys as its definition has them."""

    def __init__(self, definitions: dict[str, dict[str, Any]]) -> None:
        self._definitions = definitions

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        """The wire form ``call_next`` gives; for ``tools/list``, with those keys restored."""
        # The runner sends what its outermost middleware returns without checking it again.
        result = await call_next(ctx)
        if ctx.method != "tools/list" or not isinstance(result, dict):
            return result
        tools = [
            tool
            | {k: v for k, v in self._definitions[tool["name"]].items() if k in SENT_AS_DEFINED}
            for tool in result["tools"]
        ]
        return {**result, "tools": tools}


def build_server() -> Server[Any]:
    """The lowlevel server: it sends definitions and answers unchanged, which ``MCPServer``
    would build from Python functions instead."""
    served = {
        tool_name(index): case["input"]
        for index, case in enumerate(cases())
        if case["input"]["op"] in DEFINITION_OPS | ANSWER_OPS
    }
    definitions = {
        name: _definition(int(name.removeprefix("case_")), case_input)
        for name, case_input in served.items()
    }
    tools = [types.Tool.model_validate(definition) for definition in definitions.values()]

    async def list_tools(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        case_input = served[params.name]
        if case_input["op"] == "error":
            error = case_input["error"]
            raise MCPError(error["code"], error["message"], error.get("data"))
        if case_input["op"] == "result":
            return types.CallToolResult.model_validate(_with_real_images(case_input["result"]))
        return types.CallToolResult(content=[types.TextContent(type="text", text="called")])

    server = Server("dex-conventions", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.insert(0, SendAsDefined(definitions))  # outermost
    return server
