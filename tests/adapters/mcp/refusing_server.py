"""The test server behind a gate that refuses a request without the right credential.

``build_app()`` serves ``mcp_test_server.build_server()``; a request whose
``Authorization`` header is not ``Bearer <ACCEPTED_TOKEN>`` is answered with the
status in the environment's ``MCP_TEST_REFUSAL_STATUS`` (``401`` when unset) and
a plain-text body, as an authenticating proxy or a gateway in front of a server
does. Run it under ``http_server.py`` (``HttpTestServer(..., module=__name__)``).
"""

from __future__ import annotations

import os

from starlette.types import ASGIApp, Receive, Scope, Send

from tests.adapters.mcp.http_server import PATH
from tests.adapters.mcp.mcp_test_server import build_server

ACCEPTED_TOKEN = "let-me-in"
"""The bearer token the gate lets through."""

STATUS_VARIABLE = "MCP_TEST_REFUSAL_STATUS"
"""The environment variable naming the status of a refusal."""


def build_app() -> ASGIApp:
    """The test server's Streamable HTTP app behind the gate."""
    inner = build_server().streamable_http_app(streamable_http_path=PATH)
    status = int(os.environ.get(STATUS_VARIABLE, "401"))
    accepted = f"Bearer {ACCEPTED_TOKEN}".encode()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        # The lifespan starts the server's session manager; only requests meet the gate.
        if scope["type"] != "http" or dict(scope["headers"]).get(b"authorization") == accepted:
            await inner(scope, receive, send)
            return
        headers = [(b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"refused"})

    return app
