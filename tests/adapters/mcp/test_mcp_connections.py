"""How long a connection, a listing and the source live, and what a connection that never
opened says.

A server that never answers is the stdio test server behind ``silent_proxy.py``,
which drops the requests it is told to and logs each, so a test waits for what the
server got instead of for time to pass. Timeouts here only keep a broken case from
hanging.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from mcp.client import session as mcp_session

from dex_agents.adapters.mcp.connection import connected
from dex_agents.adapters.mcp.errors import McpConnectionError
from dex_agents.adapters.mcp.listing import ServerListings
from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig, McpToolSource
from tests.adapters.mcp import refusing_server
from tests.adapters.mcp.http_server import HttpTestServer, free_loopback_port
from tests.adapters.mcp.listing_support import listing_failures, listings_of, notes_at

SILENT_PROXY = Path(__file__).with_name("silent_proxy.py")
SLOW_START = Path(__file__).with_name("slow_start.py")
GUARD_SECONDS = 60.0
"""Only a guard: a case that is broken would wait for minutes."""


def silent_server(log: Path, *methods: str) -> McpStdioServerConfig:
    """The test server, never answering ``methods``; ``log`` gets its PID, then each one dropped."""
    return McpStdioServerConfig(
        name="quiet", command=sys.executable, args=(str(SILENT_PROXY), str(log), *methods)
    )


def dropped(log: Path) -> list[str]:
    """The requests the silent server dropped so far, in order."""
    return log.read_text().splitlines()[1:] if log.exists() else []


async def until_dropped(log: Path, method: str) -> None:
    """Wait until the silent server has dropped a ``method`` request."""
    async with asyncio.timeout(GUARD_SECONDS):
        # Another process writes the log, so there is no event to wait on.
        while method not in dropped(log):  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def until_listed(listings: ServerListings, server: str) -> None:
    """Wait until ``listings`` holds ``server``'s first listing."""
    async with asyncio.timeout(GUARD_SECONDS):
        # The listing runs in its own task, which offers no event to wait on.
        while listings.held(server) is None:  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_connection_timeout_bounds_the_probe_too(tmp_path: Path) -> None:
    # Found by an audit: the SDK's server/discover probe waits 10 seconds whatever
    # connection_timeout says, so with 1 second a server that ignores the probe got
    # initialize after 10 seconds and connected, and one that never answers held each
    # attempt for 11 seconds.
    log = tmp_path / "quiet.log"
    server = silent_server(log, "server/discover")
    with pytest.raises(McpConnectionError) as raised:
        async with connected(
            server, connection_timeout=timedelta(seconds=1), connection_attempts=1
        ):
            pass
    assert str(raised.value) == (
        "could not connect to MCP server 'quiet' in 1 attempt: TimeoutError: no answer to "
        "server/discover within connection_timeout (0:00:01); a server slower to start "
        "needs a longer connection_timeout on its McpToolSource"
    )
    assert dropped(log) == ["server/discover"]  # initialize was never sent


async def test_initialize_after_an_unanswered_probe_gets_connection_timeout_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by an audit: connection_timeout bounded the whole handshake, where "What a
    # call does" bounds each handshake request, so a stdio server whose first start
    # took 35 seconds (npx fetching its packages) never connected with the default
    # 30: its requests waited in the pipe, the SDK's probe gave up after its 10
    # seconds, and initialize was cut off 20 seconds later. The SDK's probe waits 3
    # seconds here, not 10, so the case takes seconds, not a quarter of a minute: the
    # server answers 4.5 seconds after it started, past a 4 second timeout but within
    # 3 plus 4 (its imports are made while it waits).
    monkeypatch.setattr(mcp_session, "DISCOVER_TIMEOUT_SECONDS", 3.0)
    server = McpStdioServerConfig(
        name="slow", command=sys.executable, args=(str(SLOW_START), "4.5")
    )
    async with connected(
        server, connection_timeout=timedelta(seconds=4), connection_attempts=1
    ) as client:
        assert (await client.list_tools()).tools


async def test_a_connection_that_never_opened_names_why(tmp_path: Path) -> None:
    # Found by an audit: the SDK raises a failed handshake out of its task groups,
    # so the error a model and the chat's warning showed for a refused connection
    # was "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)".
    server = McpStreamableHttpServerConfig(
        name="down", url=f"http://127.0.0.1:{free_loopback_port()}/mcp"
    )
    with pytest.raises(McpConnectionError) as raised:
        async with connected(
            server, connection_timeout=timedelta(seconds=30), connection_attempts=1
        ):
            pass
    assert str(raised.value).endswith(": ConnectError: All connection attempts failed")


@pytest.mark.parametrize(("attempts", "text"), [(1, "in 1 attempt"), (3, "in 3 attempts")])
def test_a_connection_error_counts_its_attempts_in_words(attempts: int, text: str) -> None:
    # Found by an audit: one attempt read "in 1 attempts".
    error = McpConnectionError("notes", attempts, None)
    assert str(error) == f"could not connect to MCP server 'notes' {text}"


async def test_closing_the_source_ends_a_listing_and_the_process_of_a_server_that_never_answers(
    tmp_path: Path,
) -> None:
    # Found by an audit: aclose waited for the running listings, and a server that
    # never answers holds one for its connection attempts, so a chat with such a
    # server took 2 minutes to exit after /quit.
    log = tmp_path / "quiet.log"
    source = McpToolSource(
        [silent_server(log, "server/discover", "initialize")],
        connection_timeout=timedelta(minutes=10),
    )
    listing = asyncio.create_task(source.list_tools())
    try:
        await until_dropped(log, "server/discover")
        await asyncio.wait_for(source.aclose(), GUARD_SECONDS)
    finally:
        await source.aclose()  # nothing left to end, unless the case is broken
    assert list(await listing) == []  # the server is left out; its caller is not cancelled
    with pytest.raises(ProcessLookupError):
        os.kill(int(log.read_text().split()[0]), 0)  # the server's process has ended


async def test_a_first_listing_no_one_waits_for_leaves_its_server_out_of_later_calls(
    tmp_path: Path, stdio_server: McpStdioServerConfig, caplog: pytest.LogCaptureFixture
) -> None:
    # Found by an audit: while a server's first listing went on after the runner
    # stopped waiting for it, each later model call waited for it again until the
    # runner's tool_source_listing_timeout, so the source offered nothing, not even
    # the tools of its other servers, listed long before.
    log = tmp_path / "quiet.log"
    listings = listings_of(
        silent_server(log, "server/discover", "initialize"),
        stdio_server,
        connection_timeout=timedelta(minutes=10),
    )
    try:
        first = asyncio.create_task(listings.list())
        await until_dropped(log, "server/discover")
        await until_listed(listings, "notes")
        first.cancel()  # the runner stops waiting
        with caplog.at_level(logging.WARNING), pytest.raises(asyncio.CancelledError):
            await first
        [(_, quiet), (_, notes)] = await asyncio.wait_for(listings.list(), GUARD_SECONDS)
    finally:
        await listings.aclose()
    assert quiet == ()
    assert "read_note" in [tool["name"] for tool in notes]
    assert "MCP server 'quiet' is not listed yet" in caplog.text


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (401, "401 Unauthorized"),
        (403, "403 Forbidden"),
        (404, "404 Not Found"),
        (503, "503 Service Unavailable"),
    ],
)
async def test_a_handshake_refused_with_an_http_status_names_it_and_the_url(
    status: int, text: str
) -> None:
    # Found by an audit: the SDK reports such a refusal as "Server returned an error
    # response" ("Not Found" for 404), so a user whose token had expired was not told
    # that the server refused it, nor which URL did.
    env = {refusing_server.STATUS_VARIABLE: str(status)}
    with HttpTestServer(env, module="tests.adapters.mcp.refusing_server") as server:
        refused = McpStreamableHttpServerConfig(
            name="gated",
            url=f"{server.url}?access_token=query-secret",
            headers={"Authorization": "Bearer header-secret"},
        )
        with pytest.raises(McpConnectionError) as raised:
            async with connected(
                refused, connection_timeout=timedelta(seconds=30), connection_attempts=1
            ):
                pass
        let_in = McpStreamableHttpServerConfig(
            name="gated",
            url=server.url,
            headers={"Authorization": f"Bearer {refusing_server.ACCEPTED_TOKEN}"},
        )
        async with connected(
            let_in, connection_timeout=timedelta(seconds=30), connection_attempts=1
        ) as client:
            assert (await client.list_tools()).tools  # the gate lets the right token in
    assert str(raised.value) == (
        "could not connect to MCP server 'gated' in 1 attempt: "
        f"MCPError: HTTP status {text} from {server.url}"
    )  # the URL without its query, and no header


async def test_an_unreachable_server_is_tried_again_only_after_its_backoff_and_in_the_background(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Pins "MCP tools" over "Known limitations", which says an unreachable server is
    # tried again on every list_tools call (docs/spec-differences.md).
    port = free_loopback_port()
    config = notes_at(port)
    now = 0.0
    listings = listings_of(config, clock=lambda: now)
    with caplog.at_level(logging.WARNING):
        assert await listings.list() == [(config, ())]  # the first listing is awaited
        for moment in (1.0, 15.0, 29.9):  # list_tools calls within the backoff
            now = moment
            assert await listings.list() == [(config, ())]
            await listings.settled()
        assert listing_failures(caplog) == 1  # none of them tried the server
        now = 30.0
        assert await listings.list() == [(config, ())]  # tried again, in the background
        await listings.settled()
        assert listing_failures(caplog) == 2
        with HttpTestServer({}, port=port):
            now = 60.0
            assert await listings.list() == [(config, ())]  # not waited for
            await listings.settled()
            [(_, listed)] = await listings.list()
    assert "read_note" in [tool["name"] for tool in listed]
