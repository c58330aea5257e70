"""A call's connection answers its own ``tools/list`` with the listing the Worker holds.

A tool call lists the server's tools on its connection before ``tools/call``
(``calls.list_until``), because the SDK takes the call's ``Mcp-Param-*`` headers
from a listing on the same connection (its output schema check is off:
``calls.skip_output_schema_check``). The Worker already holds that listing
(``ServerListings``, refreshed by its own rules), so asking the server again cost
a request per call, about 6 ms on loopback and a round trip to a remote server.
``held_listing_cache`` gives the connection's client a response cache whose
``tools/list`` entry is the held listing: the SDK serves it as a cache hit and
takes the headers from it, which is the SDK's public way to give a session a
listing it did not fetch itself.

Everything else behaves as a plain in-memory cache of the one connection, so a
``notifications/tools/list_changed`` during the call drops the held listing, and
an entry the SDK writes (a 2026-07-28 server's positive ``ttlMs``) is kept until
the connection closes.
"""

from __future__ import annotations

import math

from mcp.client.caching import CacheConfig, CacheEntry, CacheKey, InMemoryResponseCacheStore
from mcp_types import ListToolsResult

from dex_agents.adapters.mcp.config import McpServerConfig

TOOLS_LIST = "tools/list"
PARTITION = "dex-agents"
"""The one authorization context of a store that lives for one connection."""


class HeldListingStore(InMemoryResponseCacheStore):
    """A ``ResponseCacheStore`` whose ``tools/list`` (first page) is ``listing`` until deleted."""

    def __init__(self, listing: ListToolsResult) -> None:
        super().__init__()
        self._listing: ListToolsResult | None = listing

    async def get(self, key: CacheKey) -> CacheEntry | None:
        """The held listing for ``tools/list``, never expiring; other keys as stored."""
        if self._listing is not None and key.method == TOOLS_LIST and not key.params_key:
            # The SDK copies what it serves, so the held listing is never changed.
            return CacheEntry(value=self._listing, scope="private", expires_at=math.inf)
        return await super().get(key)

    async def set(self, key: CacheKey, entry: CacheEntry) -> None:
        """Store ``entry``; a ``tools/list`` the SDK fetched replaces the held one."""
        if key.method == TOOLS_LIST and not key.params_key:
            self._listing = None
        await super().set(key, entry)

    async def delete(self, key: CacheKey) -> None:
        """Drop ``key``; for ``tools/list`` the held listing too (the server changed its tools)."""
        if key.method == TOOLS_LIST and not key.params_key:
            self._listing = None
        await super().delete(key)

    async def clear(self) -> None:
        """Drop every entry and the held listing."""
        self._listing = None
        await super().clear()


def held_listing_cache(config: McpServerConfig, listing: ListToolsResult) -> CacheConfig:
    """The response cache of one connection to ``config`` that serves ``listing``."""
    return CacheConfig(store=HeldListingStore(listing), partition=PARTITION, target_id=config.name)
