"""The HTTP transport under every Streamable HTTP connection: an exchange with no answer.

A POST whose HTTP exchange fails (refused, reset, the server process gone before
it answered) is answered with a JSON-RPC ``CONNECTION_CLOSED`` error instead of an
exception: the SDK (mcp 2.3) raises such an error inside the transport's task
group, which cancels the calling task, so a Step would end cancelled instead of
recording the call as interrupted (or, for a handshake, as never sent).

A ``tools/call`` POST answered by an HTTP error status without a JSON-RPC error
body, or by a body that is not JSON-RPC (a content type other than JSON or an
event stream, or ``202`` with no body), is answered the same way. A gateway can
send such an answer after the server ran the call, and the SDK reports them as
codes a server uses for its own answers (``404`` as ``-32601``, an unexpected
content type as ``-32600``), which would record a call that may have run as
``failed``. Each made-up answer's message starts with ``HTTP_NO_ANSWER_PREFIX``,
so ``is_connection_interruption`` reads it as interrupted. A JSON-RPC error body
at an error status is the server's answer (an MCP 2026-07-28 server sends
``-32602`` with ``400``) and is passed on as it is.

Any other request answered by an HTTP error status without a JSON-RPC error body
gets the error the SDK would make (``-32601`` for ``404``, else ``-32603``), with
a message that names the status and the URL (``shown_url``: no user, password,
query or fragment, which can carry credentials) in place of the SDK's "Server
returned an error response", so a server refusing the handshake with ``401``
tells its user why. A ``404`` to a request carrying a legacy session's ID is left
to the SDK, which reads it as the session's end.
"""

from __future__ import annotations

import functools
import json
import ssl
from http import HTTPStatus
from typing import Any

import httpx2
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, METHOD_NOT_FOUND

from dex_agents.adapters.mcp.interruptions import HTTP_NO_ANSWER_PREFIX

_JSON_RPC_CONTENT_TYPES = ("application/json", "text/event-stream")


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """The TLS settings of every Streamable HTTP connection: the defaults a new client would
    make (system certificates, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` as they are on first use),
    made once per process.

    Every request opens a new connection, and loading the certificates took about 50 ms of
    CPU each time, two thirds of a whole call to a server on loopback. A context is safe to
    share between connections, threads and event loops.
    """
    return httpx2.create_ssl_context()


class AnsweringTransport(httpx2.AsyncBaseTransport):
    """The default transport, with a POST that gave no JSON-RPC answer answered by an error."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport(verify=shared_tls_context())

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; a POST that got no JSON-RPC answer gets a made-up error answer."""
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as error:
            if request.method != "POST":
                raise  # the SDK handles a failed GET stream or DELETE itself
            return _no_answer(request, f"{type(error).__name__}: {error}")
        method = _request_method(request) if request.method == "POST" else None
        if method is None:
            return response  # a GET stream, a DELETE, a notification or a response
        if method != "tools/call":
            if not await _is_refusal(request, response):
                return response
            await response.aclose()
            return _refusal(request, response.status_code)
        problem = await _not_json_rpc(response)
        if problem is None:
            return response
        await response.aclose()
        return _no_answer(request, problem)

    async def aclose(self) -> None:
        """Close the connections of the inner transport."""
        await self._inner.aclose()


def _request_method(request: httpx2.Request) -> str | None:
    """The method of the JSON-RPC request a POST sends, or ``None`` for anything else."""
    try:
        body: Any = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if not isinstance(body, dict) or "id" not in body:
        return None
    method = body.get("method")
    return method if isinstance(method, str) else None


def shown_url(url: httpx2.URL) -> str:
    """``url`` as an error may show it: without user, password, query and fragment."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


async def _is_refusal(request: httpx2.Request, response: httpx2.Response) -> bool:
    """Whether a request other than ``tools/call`` got an error status and no JSON-RPC error."""
    status = response.status_code
    if status < 400 or (status == 404 and "mcp-session-id" in request.headers):
        return False
    if response.headers.get("content-type", "").lower().startswith("application/json"):
        return not _is_error_answer(await response.aread())
    return True


def _refusal(request: httpx2.Request, status: int) -> httpx2.Response:
    try:
        reason = f" {HTTPStatus(status).phrase}"
    except ValueError:
        reason = ""
    message = f"HTTP status {status}{reason} from {shown_url(request.url)}"
    body = {
        "jsonrpc": "2.0",
        "id": None,  # the SDK puts the request's own ID on it
        "error": {
            "code": METHOD_NOT_FOUND if status == 404 else INTERNAL_ERROR,
            "message": message,
        },
    }
    return httpx2.Response(
        status,
        headers={"content-type": "application/json"},
        content=json.dumps(body).encode(),
        request=request,
    )


async def _not_json_rpc(response: httpx2.Response) -> str | None:
    """What is wrong with a ``tools/call`` answer, or ``None`` when the SDK can read it."""
    status = response.status_code
    content_type = response.headers.get("content-type", "").lower()
    if 300 <= status < 400:
        return None  # the SDK follows a same-origin redirect, or reports it, itself
    if status >= 400:
        if content_type.startswith("application/json") and _is_error_answer(await response.aread()):
            return None
        return f"HTTP status {status} ({content_type or 'no content type'})"
    if status == 202 or not content_type.startswith(_JSON_RPC_CONTENT_TYPES):
        return f"HTTP status {status} with content type {content_type or 'none'}"
    return None  # a body that does not parse is a parse error (-32700), interrupted already


def _is_error_answer(body: bytes) -> bool:
    try:
        message: Any = json.loads(body)
    except ValueError:
        return False
    error = message.get("error") if isinstance(message, dict) else None
    return (
        isinstance(error, dict)
        and message.get("jsonrpc") == "2.0"
        and isinstance(error.get("code"), int)
        and isinstance(error.get("message"), str)
    )


def _no_answer(request: httpx2.Request, detail: str) -> httpx2.Response:
    # The SDK puts the request's own ID on an error that names none.
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": CONNECTION_CLOSED, "message": f"{HTTP_NO_ANSWER_PREFIX}{detail}"},
    }
    return httpx2.Response(
        502,
        headers={"content-type": "application/json"},
        content=json.dumps(body).encode(),
        request=request,
    )
