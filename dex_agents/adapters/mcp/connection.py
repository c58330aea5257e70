"""One new MCP connection per request ("What a call does").

Connecting and the handshake (``server/discover`` on MCP 2026-07-28, falling back
to ``initialize`` on older servers) are bounded by ``connection_timeout`` and
tried ``connection_attempts`` times; a connection that never opened raises
``McpConnectionError``, so its request was never sent. The caller closes the
connection with ``close_quietly``: closing a connection to a server that died must
not replace the outcome the call already has.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from datetime import timedelta

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from dex_agents.adapters.mcp.config import McpServerConfig, McpStdioServerConfig
from dex_agents.adapters.mcp.errors import McpConnectionError

logger = logging.getLogger(__name__)


def _client(config: McpServerConfig, stack: AsyncExitStack, timeout: float) -> Client:
    if isinstance(config, McpStdioServerConfig):
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=None if config.env is None else dict(config.env),
            cwd=config.cwd,
        )
        return Client(params, cache=None, read_timeout_seconds=timeout)
    http = httpx2.AsyncClient(headers=dict(config.headers))
    stack.push_async_callback(http.aclose)
    return Client(
        streamable_http_client(config.url, http_client=http),
        cache=None,
        read_timeout_seconds=timeout,
    )


async def open_client(
    config: McpServerConfig,
    stack: AsyncExitStack,
    *,
    connection_timeout: timedelta,
    connection_attempts: int,
) -> Client:
    """A connected client whose closing ``stack`` owns; ``McpConnectionError`` when none opens."""
    last: BaseException | None = None
    for _ in range(connection_attempts):
        attempt = AsyncExitStack()
        try:
            # The SDK bounds each handshake request; a timeout scope around entering the
            # client would be exited while the client's own task group is still open.
            client = await attempt.enter_async_context(
                _client(config, attempt, connection_timeout.total_seconds())
            )
        except Exception as error:
            last = error
            await close_quietly(attempt)
            continue
        stack.push_async_callback(close_quietly, attempt)
        return client
    raise McpConnectionError(config.name, connection_attempts, last)


async def close_quietly(stack: AsyncExitStack) -> None:
    """Close a connection; an error while closing is logged, never raised."""
    try:
        await stack.aclose()
    except Exception:
        logger.debug("closing an MCP connection failed", exc_info=True)
