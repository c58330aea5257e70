"""The per-Worker cache of each server's ``tools/list`` ("MCP tools (dex_agents.mcp)").

The first listing of a server is awaited, and goes on when its caller stops
waiting, so a later call gets its tools; until it ends, later calls leave the
server out instead of waiting for it too. After ``listing_ttl`` the server is
listed again in the background while its earlier tools are returned. A server
that cannot be listed is left out with a warning (a server listed before keeps
its earlier tools) and not tried again for ``listing_failure_backoff``, then in
the background. One listing per server runs at a time; ``refresh`` lists now;
``aclose`` cancels the running ones. ``held`` is a server's last listing as the
SDK reads it, for a call's connection to take its headers and schemas from
(``held_listing.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from mcp_types import ListToolsResult, Tool

from dex_agents.adapters.mcp.config import McpServerConfig
from dex_agents.adapters.mcp.connection import connected
from dex_agents.adapters.mcp.paging import pages
from dex_agents.adapters.mcp.sent_annotations import keep_sent_annotations, offered_definition

logger = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass
class _ServerState:
    tools: tuple[Mapping[str, Any], ...] | None = None
    listing: ListToolsResult | None = None
    listed_at: float = 0.0
    failed_at: float | None = None
    listings: int = 0  # listings that ended, successful or not
    overdue: asyncio.Task[None] | None = None  # a first listing a caller stopped waiting for
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


async def fetch_tools(
    config: McpServerConfig, *, connection_timeout: timedelta, connection_attempts: int
) -> tuple[Tool, ...]:
    """Every page of one server's ``tools/list``, in the server's order.

    Each tool keeps its annotations as sent (``sent_annotations.py``).
    ``RepeatedCursorError`` for a server whose cursors never end, like any failure.
    """
    async with connected(
        config, connection_timeout=connection_timeout, connection_attempts=connection_attempts
    ) as client:
        keep_sent_annotations(client)
        tools: list[Tool] = []
        async for page in pages(lambda cursor: client.list_tools(cursor=cursor)):
            tools.extend(page.tools)
        return tuple(tools)


class ServerListings:
    """The cached tools of each server, in server order."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        *,
        listing_ttl: timedelta,
        listing_failure_backoff: timedelta,
        connection_timeout: timedelta,
        connection_attempts: int,
        clock: Clock = time.monotonic,
    ) -> None:
        self._servers = tuple(servers)
        self._states = {server.name: _ServerState() for server in self._servers}
        self._ttl = listing_ttl.total_seconds()
        self._backoff = listing_failure_backoff.total_seconds()
        self._connection_timeout = connection_timeout
        self._connection_attempts = connection_attempts
        self.clock = clock
        self._background: set[asyncio.Task[None]] = set()

    def cached(self) -> list[tuple[McpServerConfig, tuple[Mapping[str, Any], ...]]]:
        """Each server's last listing, without I/O; a server never listed has none."""
        return [(s, self._states[s.name].tools or ()) for s in self._servers]

    def held(self, server: str) -> ListToolsResult | None:
        """``server``'s last listing, every page in one, without I/O; ``None`` before the first."""
        state = self._states.get(server)
        return None if state is None else state.listing

    async def list(
        self, *, refresh: bool = False
    ) -> list[tuple[McpServerConfig, tuple[Mapping[str, Any], ...]]]:
        """Each server's tools now, by the cache rules above."""
        return list(await asyncio.gather(*(self._one(s, refresh) for s in self._servers)))

    async def _one(
        self, server: McpServerConfig, refresh: bool
    ) -> tuple[McpServerConfig, tuple[Mapping[str, Any], ...]]:
        state = self._states[server.name]
        now = self.clock()
        if refresh:
            await self._list_locked(server, state)
        elif state.tools is None and state.failed_at is None:
            if state.overdue is not None and not state.overdue.done():
                # A caller stopped waiting for this first listing, so it is slower than
                # the runner waits: a later call waiting too would time out each time
                # and the source would offer nothing, hiding the other servers' tools.
                return server, ()
            # The first listing is awaited; one that ends while this call waits decides.
            # It runs as its own task: a caller that stops waiting (the runner's
            # tool_source_listing_timeout) must not cancel it, or a server slower to
            # list than that would never be listed.
            listing = self._start(
                self._list_locked(server, state, unless_listed_since=state.listings)
            )
            try:
                # Not shield: a listing aclose cancels leaves the server out, not this
                # caller cancelled.
                await asyncio.wait([listing])
            except asyncio.CancelledError:
                if not listing.done():
                    state.overdue = listing
                    logger.warning(
                        "MCP server %r is not listed yet; its tools are left out until "
                        "its first listing ends",
                        server.name,
                    )
                raise
        elif state.failed_at is not None:
            # A failed listing waits out the backoff, also when earlier tools are kept.
            if now - state.failed_at >= self._backoff:
                self._in_background(server, state)
        elif now - state.listed_at >= self._ttl:
            self._in_background(server, state)
        return server, state.tools or ()

    def _in_background(self, server: McpServerConfig, state: _ServerState) -> None:
        if state.lock.locked():
            return
        self._start(self._list_locked(server, state))

    def _start(self, listing: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(listing)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _list_locked(
        self,
        server: McpServerConfig,
        state: _ServerState,
        *,
        unless_listed_since: int | None = None,
    ) -> None:
        async with state.lock:
            if unless_listed_since is not None and state.listings > unless_listed_since:
                return  # a listing ended while this one waited for the lock
            try:
                tools = await fetch_tools(
                    server,
                    connection_timeout=self._connection_timeout,
                    connection_attempts=self._connection_attempts,
                )
            except Exception:
                state.listings += 1
                state.failed_at = self.clock()
                logger.warning(
                    "MCP server %r could not be listed; %s for %s seconds",
                    server.name,
                    "its tools are left out"
                    if state.tools is None
                    else "its earlier tools are kept",
                    self._backoff,
                    exc_info=True,
                )
                return
            state.tools = tuple(offered_definition(t) for t in tools)
            state.listing = ListToolsResult(tools=list(tools))
            state.listed_at, state.failed_at = self.clock(), None
            state.listings += 1

    async def settled(self) -> None:
        """Wait for the running listings to end."""
        await asyncio.gather(*self._background, return_exceptions=True)

    async def aclose(self) -> None:
        """End the running listings: each is cancelled, and its connection closed.

        A server that never answers held a listing for its connection attempts, up to
        ``connection_attempts`` x ``connection_timeout``, and closing waited it out: a
        chat with such a server took 2 minutes to exit. The SDK still ends a stdio
        server's process when its connection is cancelled.
        """
        for listing in self._background:
            listing.cancel()
        await self.settled()
