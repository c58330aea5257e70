"""One new MCP connection per request ("What a call does").

Connecting and each handshake request (``server/discover`` on MCP 2026-07-28,
falling back to ``initialize`` on older servers) are bounded by
``connection_timeout`` (``handshake_bound.py``), and tried ``connection_attempts``
times; a connection that never opened raises
``McpConnectionError``, so its request was never sent. Every client declares the
tasks extension (``tasks.tasks_extension``), so a server may answer a call with a
task. The caller closes the connection with ``close_quietly``: closing a
connection to a server that died must not replace the outcome the call already has.

Over Streamable HTTP the HTTP client has no read timeout of its own: the SDK
bounds each request by ``connection_timeout`` or ``request_timeout``, and an
httpx default of 5 seconds would cut off every call that runs longer. Its
transport (``http_transport.AnsweringTransport``) answers a POST that got no
JSON-RPC answer with an error, so the call is recorded as interrupted.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.caching import CacheConfig
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ListToolsResult

from dex_agents.adapters.mcp.config import McpServerConfig, McpStdioServerConfig
from dex_agents.adapters.mcp.errors import McpConnectionError
from dex_agents.adapters.mcp.handshake_bound import HandshakeBound, watched
from dex_agents.adapters.mcp.held_listing import held_listing_cache
from dex_agents.adapters.mcp.http_transport import AnsweringTransport
from dex_agents.adapters.mcp.tasks import tasks_extension

logger = logging.getLogger(__name__)


def _client(
    config: McpServerConfig,
    stack: AsyncExitStack,
    bound: HandshakeBound,
    timeout: float,
    cache: CacheConfig | None,
) -> Client:
    if isinstance(config, McpStdioServerConfig):
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=None if config.env is None else dict(config.env),
            cwd=config.cwd,
        )
        return Client(
            watched(stdio_client(params), bound),
            cache=cache,
            read_timeout_seconds=timeout,
            extensions=[tasks_extension()],
        )
    http = httpx2.AsyncClient(
        headers=dict(config.headers),
        timeout=httpx2.Timeout(timeout, read=None),
        transport=AnsweringTransport(),
    )
    stack.push_async_callback(http.aclose)
    return Client(
        watched(streamable_http_client(config.url, http_client=http), bound),
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
    seconds = connection_timeout.total_seconds()
    last: BaseException | None = None
    for _ in range(connection_attempts):
        attempt = AsyncExitStack()
        cache = None if listing is None else held_listing_cache(config, listing)
        bound = HandshakeBound(connection_timeout)
        try:
            async with bound.timeout():
                client = await attempt.enter_async_context(
                    _client(config, attempt, bound, seconds, cache)
                )
        except Exception as error:
            last = bound.timed_out(error) or error
            await close_quietly(attempt)
            continue
        finally:
            bound.ended()
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
