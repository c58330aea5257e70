"""Telling the SDK's own closed-stream and timeout errors from a server's JSON-RPC error.

The MCP SDK (mcp 2.3) reports a stream that closed, or an answer that never came,
as an ``MCPError`` with ``CONNECTION_CLOSED`` (``-32000``) or ``REQUEST_TIMEOUT``
(``-32001``). Those codes are also in the server-defined range ``-32000..-32099``,
so a server's own ``MCP error -32000: broken`` must not be read as a broken stream:
it is an answer, recorded ``failed`` and never sent again. What the SDK makes
itself has fixed messages and no ``data``; so has what the HTTP transport here
answers for an exchange that gave no JSON-RPC answer (``HTTP_NO_ANSWER_PREFIX``).
A server that sends one of those exact messages is read as interrupted, which is
the safe side: a write is then recorded ``outcome_unknown``, never ``failed``.
"""

from __future__ import annotations

import re

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

HTTP_NO_ANSWER_PREFIX = "the HTTP exchange gave no JSON-RPC answer: "
"""The start of the message of an answer the HTTP transport made up for a failed exchange."""

_SDK_CLOSED = re.compile(
    # jsonrpc_dispatcher and session: "Connection closed"; streamable_http's
    # _resolve_abandoned_request: "SSE stream failed: ...", "SSE stream ended ...".
    r"Connection closed|SSE stream (failed: |ended ).*|" + re.escape(HTTP_NO_ANSWER_PREFIX) + r".*",
    re.DOTALL,
)
_SDK_TIMEOUT = re.compile(
    # jsonrpc_dispatcher: "Request 'tools/call' timed out"; direct_dispatcher:
    # "Timed out after 5.0s waiting for 'tools/call'".
    r"Request '.*' timed out|Timed out after .* waiting for '.*'",
    re.DOTALL,
)


def is_connection_interruption(error: MCPError) -> bool:
    """Whether ``error`` is the SDK's (or the HTTP transport's) own: no answer came.

    ``True`` for a closed stream or connection, a request timeout, and an HTTP
    exchange that gave no JSON-RPC answer; ``False`` for an error the server sent.
    """
    if error.data is not None:
        return False  # the SDK never attaches data to the errors it makes itself
    if error.code == CONNECTION_CLOSED:
        return _SDK_CLOSED.fullmatch(error.message) is not None
    if error.code == REQUEST_TIMEOUT:
        return _SDK_TIMEOUT.fullmatch(error.message) is not None
    return False
