"""``McpToolSource`` in whole sessions on the embedded engine, against a Streamable HTTP server.

The server is ``mcp_test_server.py`` under uvicorn on loopback (``http_server.py``),
started again whenever a crash tool ends its process mid-call.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from datetime import timedelta
from typing import Any

import httpcore2
import pytest
from mcp.client.session import ClientSession
from mcp_types import ListToolsResult, PaginatedRequestParams

from dex_agents.adapters.mcp.calls import WaitForTask, call_mcp_tool
from dex_agents.adapters.mcp.http_transport import shared_tls_context
from dex_agents.builtin_loop import (
    InMemoryMediaStore,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
)
from dex_agents.builtin_loop import ScriptedToolCall as Call
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import McpToolProgressPayload
from dex_agents.domain.runner_outcomes import ToolExecutionResult, ToolTaskStarted
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.mcp import McpStreamableHttpServerConfig, McpToolSource
from tests.adapters.mcp.conftest import CallLog
from tests.adapters.mcp.http_server import HttpTestServer, free_loopback_port
from tests.adapters.mcp.listing_support import listing_failures, listings_of, notes_at
from tests.adapters.mcp.session_support import (
    SESSION,
    approve,
    calls_then_answer,
    events,
    keys,
    outputs,
    running,
    session,
    turn,
)


async def test_a_read_runs_without_approval_and_carries_the_idempotency_key(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([http_server])
    async with session(source, calls_then_answer(("notes__read_note", {"name": "a"}))) as s:
        snapshot = await turn(s)
    assert snapshot.pending_interrupts == ()
    assert snapshot.messages[-1].text == "note a: hello"
    (key,) = keys(call_log, "read_note")
    assert key.startswith(f"{SESSION}/")
    assert key.endswith("/c1")


async def test_every_connection_shares_the_tls_settings_loaded_once(
    http_server: McpStreamableHttpServerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each request opens a new connection (the listing, then each call); loading the
    # system's certificates for each took about 50 ms, most of a call on loopback.
    loads: list[bool] = []
    load = httpcore2.default_ssl_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        loads.append(True)
        return load(*args, **kwargs)

    monkeypatch.setattr(httpcore2, "default_ssl_context", counted)
    shared_tls_context.cache_clear()
    calls = (("notes__read_note", {"name": "a"}), ("notes__read_note", {"name": "b"}))
    source = McpToolSource([http_server])
    async with session(source, calls_then_answer(*calls)) as s:
        snapshot = await turn(s)
    assert snapshot.messages[-1].text == "note a: hello | note b: hello"
    assert loads == [True]


@pytest.fixture
def list_requests(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The cursor of each ``tools/list`` request any client sends, in order."""
    sent: list[str | None] = []
    send = ClientSession.list_tools

    async def counted(
        self: ClientSession, *, params: PaginatedRequestParams | None = None
    ) -> ListToolsResult:
        sent.append(None if params is None else params.cursor)
        return await send(self, params=params)

    monkeypatch.setattr(ClientSession, "list_tools", counted)
    return sent


async def test_an_argument_a_tool_mirrors_into_a_header_reaches_a_2026_server(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog, list_requests: list[str | None]
) -> None:
    # MCP 2026-07-28: a client sends each argument annotated with x-mcp-header as an
    # Mcp-Param-* header too, and the server refuses a call whose header is missing.
    # The SDK takes the annotations from a listing on the call's own connection: the
    # listing the Worker holds, so the calls send no tools/list of their own.
    source = McpToolSource([http_server])
    calls = (("notes__regional_note", {"region": "eu"}), ("notes__read_note", {"name": "a"}))
    async with session(source, calls_then_answer(*calls)) as s:
        snapshot = await turn(s)
    assert snapshot.messages[-1].text == "note of eu: hello | note a: hello"
    assert [c["arguments"] for c in call_log.calls("regional_note")] == [{"region": "eu"}]
    assert list_requests == [None]


async def call_once(
    config: McpStreamableHttpServerConfig,
    tool: str,
    arguments: dict[str, Any],
    *,
    listing: ListToolsResult | None = None,
) -> ToolExecutionResult | ToolTaskStarted:
    """One ``tools/call`` of ``tool`` as a tool Step sends it, on one connection attempt."""
    return await call_mcp_tool(
        config,
        tool,
        arguments,
        idempotency_key="k",
        media_store=None,
        connection_timeout=timedelta(seconds=30),
        connection_attempts=1,
        request_timeout=timedelta(seconds=30),
        tasks=WaitForTask(timeout=timedelta(seconds=30)),
        listing=listing,
    )


async def test_a_call_lists_the_server_when_the_held_listing_lacks_its_tool(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog, list_requests: list[str | None]
) -> None:
    # A listing held from before the server added the tool: the call's connection
    # lists again, so the header still reaches the server.
    result = await call_once(
        http_server, "regional_note", {"region": "us"}, listing=ListToolsResult(tools=[])
    )
    assert result == ToolExecutionResult("note of us: hello")
    assert [c["arguments"] for c in call_log.calls("regional_note")] == [{"region": "us"}]
    assert list_requests == [None]


async def test_a_call_whose_listing_fails_is_never_sent(call_log: CallLog) -> None:
    # Listed after the call (the SDK's own order), the failure made a call that ran
    # look interrupted, and a read was sent again.
    env = {"MCP_TEST_CALL_LOG": str(call_log.path)}
    with HttpTestServer(env, module="tests.adapters.mcp.unlistable_server") as server:
        config = McpStreamableHttpServerConfig(name="down", url=server.url)
        with pytest.raises(ToolExecutionError) as raised:
            await call_once(config, "lookup", {})
    assert str(raised.value) == (
        "the MCP tool call was not sent: listing the server's tools failed: "
        "MCPError: the tool registry is down"
    )
    assert call_log.calls() == []


async def test_the_tools_are_built_once_per_listing(
    http_server: McpStreamableHttpServerConfig,
) -> None:
    # Every model call lists the source; building each tool (its name, effect and
    # policy) cost about 50 us a tool in each call, for tools that had not changed.
    source = McpToolSource([http_server])
    first = await source.list_tools()
    again = await source.list_tools()
    assert len(first) > 10
    assert all(now is then for now, then in zip(again, first, strict=True))
    relisted = await source.list_tools(refresh=True)
    assert relisted == first
    assert not any(now is then for now, then in zip(relisted, first, strict=True))
    await source.aclose()


async def test_a_write_waits_for_approval_then_runs_once(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([http_server])
    async with session(source, calls_then_answer(("notes__send_email", {"to": "bo"}))) as s:
        waiting = await turn(s)
        (approval,) = waiting.pending_interrupts
        assert approval.tool_name == "notes__send_email"
        assert call_log.calls("send_email") == []
        snapshot = await approve(s, waiting)
    assert snapshot.messages[-1].text == "sent to bo"
    assert len(call_log.calls("send_email")) == 1


async def test_a_read_whose_server_dies_mid_call_is_sent_again_with_the_same_key(
    http_server: McpStreamableHttpServerConfig,
    http_test_server: HttpTestServer,
    call_log: CallLog,
) -> None:
    source = McpToolSource([http_server])
    async with session(source, calls_then_answer(("notes__crash_once_read", {}))) as s:
        snapshot = await turn(s)
    assert snapshot.messages[-1].text == "read after a crash"
    first, second = keys(call_log, "crash_once_read")
    assert first == second
    assert http_test_server.starts == 2


async def test_a_write_whose_server_dies_mid_call_is_outcome_unknown_and_never_resent(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([http_server])
    async with session(source, calls_then_answer(("notes__crash_write", {}))) as s:
        snapshot = await approve(s, await turn(s))
    assert outputs(snapshot) == [OUTCOME_UNKNOWN_TOOL_RESULT]
    assert len(call_log.calls("crash_write")) == 1


async def test_progress_and_an_image_come_over_the_event_stream(
    http_server: McpStreamableHttpServerConfig,
) -> None:
    store = InMemoryMediaStore()
    source = McpToolSource([http_server], media_store=store)
    model = calls_then_answer(("notes__slow_count", {}), ("notes__picture", {}))
    async with running(source, model, media_store=store) as (runtime, flow):
        sessions = runtime.sessions(flow)
        await sessions.open_session(SESSION)
        snapshot = await turn(sessions)
        progress = [e.payload for e in await events(runtime, flow) if e.type == "mcp.tool_progress"]
    assert progress == [
        McpToolProgressPayload(
            tool_call_id="c1",
            tool_name="notes__slow_count",
            progress=done,
            total=2.0,
            message=message,
        )
        for done, message in ((1.0, "halfway"), (2.0, "done"))
    ]
    assert outputs(snapshot) == ["counted", "a dot:\n[image 1]"]
    (picture,) = [m for m in snapshot.messages if m.tool_output == "a dot:\n[image 1]"]
    assert len(picture.images) == 1


def read_when_offered(request: ModelRequest) -> ScriptedModelReply:
    """Call ``notes__read_note`` when it is offered; else say which tools are."""
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=results[-1].output)
    offered = [tool.name for tool in request.tools]
    if "notes__read_note" in offered:
        return ScriptedModelReply(tool_calls=(Call("notes__read_note", {"name": "b"}),))
    return ScriptedModelReply(text=f"offered: {offered}")


async def test_a_server_that_cannot_be_listed_is_left_out_until_its_backoff_passes(
    call_log: CallLog, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_loopback_port()
    config = notes_at(port)
    backoff = timedelta(seconds=30)
    source = McpToolSource([config], listing_failure_backoff=backoff)
    # The listings' clock moves only when the test says, so a loaded machine's slow
    # server start cannot pass the backoff before the turn that must not ask the server.
    now = 0.0
    source._listings.clock = lambda: now
    async with session(source, ScriptedModelClient(read_when_offered)) as s:
        with caplog.at_level(logging.WARNING):
            down = await turn(s)
        assert down.messages[-1].text == "offered: []"
        assert "MCP server 'notes' could not be listed" in caplog.text
        with HttpTestServer({"MCP_TEST_CALL_LOG": str(call_log.path)}, port=port):
            # The server answers now, but within the backoff it is not asked.
            now = backoff.total_seconds() - 1
            within = await turn(s)
            assert within.messages[-1].text == "offered: []"
            # After the backoff a background listing runs; a later one returns its tools.
            now = backoff.total_seconds() + 1
            deadline = time.monotonic() + 30
            while not await source.list_tools():
                assert time.monotonic() < deadline, "the server was never listed again"
                await asyncio.sleep(0.05)
            back = await turn(s)
    assert back.messages[-1].text == "note b: hello"
    assert len(call_log.calls("read_note")) == 1


async def test_a_listed_server_that_cannot_be_listed_again_waits_out_its_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Found by an audit: once a server had tools, a failed listing after listing_ttl
    # set no backoff, so every later model call started another listing of it.
    port = free_loopback_port()
    config = notes_at(port)
    now = 0.0
    listings = listings_of(config, clock=lambda: now)
    with HttpTestServer({}, port=port):
        [(_, listed)] = await listings.list()
    now = 301.0  # the listing is due again, and the server is down
    with caplog.at_level(logging.WARNING):
        for _ in range(5):  # a model call a second, within the backoff
            [(_, offered)] = await listings.list()
            await listings.settled()  # the background listing has ended
            now += 1.0
    assert listing_failures(caplog) == 1
    assert offered == listed  # the earlier tools are still offered
    now = 301.0 + 30.0
    with caplog.at_level(logging.WARNING):
        await listings.list()
        await listings.settled()
    assert listing_failures(caplog) == 2  # tried again once the backoff passed


async def test_a_first_listing_the_runner_stops_waiting_for_goes_on_for_a_later_model_call(
    call_log: CallLog,
) -> None:
    # Found by an audit: the runner's tool_source_listing_timeout cancelled a server's
    # first listing, so a server slower to list than that (an npx server's first
    # start) was never listed: every model call started its first listing again and
    # timed out, and the source's other servers' tools were never offered either.
    server = HttpTestServer({"MCP_TEST_CALL_LOG": str(call_log.path)})  # not answering yet
    config = McpStreamableHttpServerConfig(name="notes", url=server.url)
    listings = listings_of(config, connection_attempts=3)
    with pytest.raises(TimeoutError):
        # The runner's wait; the connection waits in the listening socket's backlog.
        await asyncio.wait_for(listings.list(), timeout=0.5)
    with server:  # the server starts and answers the waiting listing
        await listings.settled()  # the listing has ended
    [(_, offered)] = await listings.list()  # the server is gone: only the held tools
    assert "read_note" in [tool["name"] for tool in offered]


async def test_a_tool_a_server_lists_twice_is_offered_once_and_the_second_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Found by an audit: the second tool of a name was dropped without the warning log
    # that "MCP tools" asks for when two tools get the same name.
    with HttpTestServer({}, module="tests.adapters.mcp.repeated_name_server") as server:
        source = McpToolSource([McpStreamableHttpServerConfig(name="dir", url=server.url)])
        with caplog.at_level(logging.WARNING, logger="dex_agents.adapters.mcp"):
            offered = await source.list_tools()
        await source.aclose()
    assert [(tool.name, tool.description) for tool in offered] == [
        ("dir__lookup", "The first tool named lookup.")
    ]
    assert [
        record.getMessage()
        for record in caplog.records
        if record.name == "dex_agents.adapters.mcp.source"
    ] == [
        "MCP tool 'lookup' of server 'dir' is left out: its name 'dir__lookup' is already "
        "used by tool 'lookup' of server 'dir'"
    ]


async def test_model_calls_that_wait_for_one_first_listing_take_its_outcome(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Found by an audit: each model call that waited behind a server's first listing
    # listed it again once that listing ended, so four sessions starting at once on a
    # Worker listed a server that was down four times in a row, ignoring the backoff.
    port = free_loopback_port()
    config = notes_at(port)
    listings = listings_of(config, connection_timeout=timedelta(seconds=5))
    with caplog.at_level(logging.WARNING):
        offered = await asyncio.gather(*(listings.list() for _ in range(4)))
    assert [tools for [(_, tools)] in offered] == [()] * 4
    assert listing_failures(caplog) == 1
