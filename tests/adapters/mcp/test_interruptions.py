"""``is_connection_interruption``: the SDK's own closed/timeout errors against a server's answers."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from dex_agents.adapters.mcp.interruptions import HTTP_NO_ANSWER_PREFIX, is_connection_interruption


@pytest.mark.parametrize(
    ("code", "message", "data", "interrupted"),
    [
        (-32000, "Connection closed", None, True),
        (-32000, "SSE stream ended without a response", None, True),
        (-32000, "SSE stream ended and reconnection attempts were exhausted", None, True),
        (-32000, "SSE stream failed: boom", None, True),
        (-32000, f"{HTTP_NO_ANSWER_PREFIX}ConnectError: refused", None, True),
        (-32001, "Request 'tools/call' timed out", None, True),
        (-32001, "Timed out after 5.0s waiting for 'tools/call'", None, True),
        (-32000, "broken", None, False),
        (-32001, "broken", None, False),
        (-32001, "Request timed out upstream", None, False),
        (-32000, "Connection closed", {"detail": "the server's own"}, False),
        (-32001, "Request 'tools/call' timed out", {"_meta": {}}, False),
        (-32603, "Connection closed", None, False),
        (-32602, "Request 'tools/call' timed out", None, False),
    ],
    ids=[
        "dispatcher closed",
        "SSE ended",
        "SSE reconnection exhausted",
        "SSE failed",
        "HTTP exchange failed",
        "dispatcher timeout",
        "direct dispatcher timeout",
        "server -32000",
        "server -32001",
        "server -32001 about a timeout",
        "closed with data is the server's",
        "timeout with data is the server's",
        "another code",
        "another code with a timeout text",
    ],
)
def test_only_the_sdks_own_errors_are_interruptions(
    code: int, message: str, data: object, interrupted: bool
) -> None:
    assert is_connection_interruption(MCPError(code, message, data)) is interrupted
