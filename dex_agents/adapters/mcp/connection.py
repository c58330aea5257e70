"""One new MCP connection per request ("What a call does").

Connecting and the handshake (``server/discover`` on MCP 2026-07-28, falling back
to ``initialize`` on older servers) are bounded by ``connection_timeout`` and
tried ``connection_attempts`` times; a connection that never opened raises
``McpConnectionError``, so its request was never sent. Every client declares the
tasks extension (``tasks.tasks_extension``), so a server may answer a call with a
task. The caller closes the connection with ``close_quietly``: closing a
connection to a server that died must not replace the outcome the call already has.

Over Streamable HTTP the HTTP client has no read timeout of its own: the SDK
bounds each request by ``connection_timeout`` or ``request_timeout``, and an
httpx default of 5 seconds would cut off every call that runs longer. A POST
whose HTTP exchange fails (refused, reset, the server process gone before it
answered) is answered with a JSON-RPC ``CONNECTION_CLOSED`` error instead of an
exception: the SDK (mcp 2.3) raises such an error inside the transport's task
group, which cancels the calling task, so a Step would end cancelled instead of
recording the call as interrupted (or, for a handshake, as never sent).
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.caching import CacheConfig
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED, ListToolsResult

from dex_agents.adapters.mcp.config import McpServerConfig, McpStdioServerConfig
from dex_agents.adapters.mcp.errors import McpConnectionError
from dex_agents.adapters.mcp.held_listing import held_listing_cache
from dex_agents.adapters.mcp.interruptions import HTTP_NO_ANSWER_PREFIX
from dex_agents.adapters.mcp.tasks import tasks_extension

logger = logging.getLogger(__name__)


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


class _AnsweringTransport(httpx2.AsyncBaseTransport):
    """The default transport, with a failed POST answered by a ``CONNECTION_CLOSED`` error."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport(verify=shared_tls_context())

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.TransportError as error:
            if request.method != "POST":
                raise  # the SDK handles a failed GET stream or DELETE itself
            # The SDK puts the request's own ID on an error that names none.
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": CONNECTION_CLOSED,
                    "message": f"{HTTP_NO_ANSWER_PREFIX}{type(error).__name__}: {error}",
                },
            }
            return httpx2.Response(
                502,
                headers={"content-type": "application/json"},
                content=json.dumps(body).encode(),
                request=request,
            )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _client(
    config: McpServerConfig, stack: AsyncExitStack, timeout: float, cache: CacheConfig | None
) -> Client:
    if isinstance(config, McpStdioServerConfig):
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=None if config.env is None else dict(config.env),
            cwd=config.cwd,
        )
        return Client(
            params, cache=cache, read_timeout_seconds=timeout, extensions=[tasks_extension()]
        )
    http = httpx2.AsyncClient(
        headers=dict(config.headers),
        timeout=httpx2.Timeout(timeout, read=None),
        transport=_AnsweringTransport(),
    )
    stack.push_async_callback(http.aclose)
    return Client(
        streamable_http_client(config.url, http_client=http),
        cache=cache,
        read_timeout_seconds=timeout,
        extensions=[tasks_extension()],
    )


async def open_client(
    config: McpServerConfig,
    stack: AsyncExitStack,
    *,
    connection_timeout: timedelta,
    connection_attempts: int,
    listing: ListToolsResult | None = None,
) -> Client:
    """A connected client whose closing ``stack`` owns; ``McpConnectionError`` when none opens.

    With ``listing``, the client's ``list_tools()`` answers with it, without a request
    (``held_listing.py``); without, the client caches nothing.
    """
    last: BaseException | None = None
    for _ in range(connection_attempts):
        attempt = AsyncExitStack()
        try:
            # The SDK bounds each handshake request; a timeout scope around entering the
            # client would be exited while the client's own task group is still open.
            cache = None if listing is None else held_listing_cache(config, listing)
            client = await attempt.enter_async_context(
                _client(config, attempt, connection_timeout.total_seconds(), cache)
            )
        except Exception as error:
            last = error
            await close_quietly(attempt)
            continue
        stack.push_async_callback(close_quietly, attempt)
        return client
    raise McpConnectionError(config.name, connection_attempts, last)


@asynccontextmanager
async def connected(
    config: McpServerConfig, *, connection_timeout: timedelta, connection_attempts: int
) -> AsyncIterator[Client]:
    """``async with connected(...) as client``: a new connection for one request, closed quietly.

    ``McpConnectionError`` when none opens, as ``open_client``.
    """
    stack = AsyncExitStack()
    try:
        yield await open_client(
            config,
            stack,
            connection_timeout=connection_timeout,
            connection_attempts=connection_attempts,
        )
    finally:
        await close_quietly(stack)


async def close_quietly(stack: AsyncExitStack) -> None:
    """Close a connection; an error while closing is logged, never raised."""
    try:
        await stack.aclose()
    except Exception:
        logger.debug("closing an MCP connection failed", exc_info=True)
