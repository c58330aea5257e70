"""``ServerListings`` as the MCP listing tests build them, and the failures they logged."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from dex_agents.adapters.mcp.config import McpServerConfig, McpStreamableHttpServerConfig
from dex_agents.adapters.mcp.listing import Clock, ServerListings


def notes_at(port: int) -> McpStreamableHttpServerConfig:
    """The test server "notes" over HTTP on loopback ``port``, where nothing may listen yet."""
    return McpStreamableHttpServerConfig(name="notes", url=f"http://127.0.0.1:{port}/mcp")


def listings_of(
    *servers: McpServerConfig,
    clock: Clock = time.monotonic,
    connection_timeout: timedelta = timedelta(seconds=30),
    connection_attempts: int = 1,
) -> ServerListings:
    """``servers``' listings with ``McpToolSource``'s default listing_ttl (5 minutes) and
    listing_failure_backoff (30 seconds); one connection attempt unless ``connection_attempts``."""
    return ServerListings(
        servers,
        listing_ttl=timedelta(minutes=5),
        listing_failure_backoff=timedelta(seconds=30),
        connection_timeout=connection_timeout,
        connection_attempts=connection_attempts,
        clock=clock,
    )


def listing_failures(caplog: pytest.LogCaptureFixture) -> int:
    """How many times a server could not be listed, by the warnings logged so far."""
    return sum("could not be listed" in r.getMessage() for r in caplog.records)
