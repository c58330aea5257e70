"""The test server behind a gateway that answers some calls in place of the server.

``build_app()`` serves ``mcp_test_server.build_server()`` with extra tools named
``gw_<mode>``: for a ``tools/call`` of one, the gateway lets the server run the call
(which logs it), throws the server's answer away and answers instead with
``GATEWAY_ANSWERS[mode]``: an HTTP error status without a JSON-RPC body, a body
that is not JSON-RPC, or ``202`` with no body; or with the JSON-RPC result
``GATEWAY_RESULTS[mode]``. ``gw_write_<mode>`` tools are
declared ``non_idempotent_write`` without approval, ``gw_read_<mode>`` tools are
reads. Run it under ``http_server.py`` (``HttpTestServer(..., module=__name__)``).
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.adapters.mcp.http_server import PATH
from tests.adapters.mcp.mcp_test_server import DEX_EFFECT, _log, build_server

GATEWAY_ANSWERS: dict[str, tuple[int, str, bytes]] = {
    "404": (404, "text/plain", b"not found"),
    "404_json": (404, "application/json", b'{"detail": "no route"}'),
    "503": (503, "text/plain", b"unavailable"),
    "html": (200, "text/html", b"<html>oops</html>"),
    "202": (202, "", b""),
}
"""What the gateway answers for each mode: status, content type and body."""

GATEWAY_RESULTS: dict[str, dict[str, Any]] = {
    # An input request whose elicitation the SDK's models refuse (its message is no string).
    "input_malformed": {
        "resultType": "input_required",
        "inputRequests": {"ok": {"method": "elicitation/create", "params": {"message": 5}}},
    },
}
"""What the gateway answers for each result mode: the JSON-RPC result to the call's request."""


def _gateway_tool(name: str) -> Any:
    async def tool(ctx: Context) -> str:
        _log(name, ctx, {})
        return "the server's answer, which the gateway drops"

    return tool


def _add_gateway_tools(server: MCPServer) -> None:
    for mode in [*GATEWAY_ANSWERS, *GATEWAY_RESULTS]:
        read = f"gw_read_{mode}"
        annotations = ToolAnnotations(read_only_hint=True)
        server.tool(name=read, annotations=annotations)(_gateway_tool(read))
        write = f"gw_write_{mode}"
        server.tool(name=write, meta={DEX_EFFECT: "non_idempotent_write"})(_gateway_tool(write))


def _gateway(inner: ASGIApp) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        request = json.loads(body)
        params = request.get("params") or {}
        name = params.get("name", "") if request.get("method") == "tools/call" else ""
        if not name.startswith("gw_"):
            await inner(scope, replay, send)
            return

        async def drop(message: Message) -> None:
            pass

        await inner(scope, replay, drop)  # the server runs the call
        mode = name.split("_", 2)[2]
        if mode in GATEWAY_RESULTS:
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": GATEWAY_RESULTS[mode]}
            status, content_type, text = 200, "application/json", json.dumps(answer).encode()
        else:
            status, content_type, text = GATEWAY_ANSWERS[mode]
        headers = [(b"content-type", content_type.encode())] if content_type else []
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": text})

    return app


def build_app() -> ASGIApp:
    """The test server's Streamable HTTP app behind the gateway."""
    server = build_server()
    _add_gateway_tools(server)
    inner = server.streamable_http_app(streamable_http_path=PATH)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        # The lifespan starts the server's session manager; only requests pass the gateway.
        handler = inner if scope["type"] == "lifespan" else _gateway(inner)
        await handler(scope, receive, send)

    return app
