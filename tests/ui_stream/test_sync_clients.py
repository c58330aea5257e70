"""The synchronous clients: the embedded engine's ``SyncLocalFlowClient`` and the argument checks.

``SyncLocalFlowClient`` runs beside a ``LocalRuntime`` in the same process, in
other threads, as a WSGI server's would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.local.stream_pages import LocalStreamPageReader
from dex_agents.adapters.local.sync_client import SyncLocalFlowClient
from dex_agents.composition.sync_session_client import open_sync_flow_client
from dex_agents.domain.errors import InvalidSessionIdError
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import (
    FlowNotFoundError,
    InvalidResumeTokenError,
    StreamReadTimeoutError,
)
from dex_agents.ui_stream import (
    InvalidAgentEventResumeTokenError,
    read_agent_event_stream_snapshot,
    read_agent_event_stream_snapshot_sync,
    stream_agent_event_frames,
    stream_agent_event_frames_sync,
)
from tests.ui_stream.agent import make_flow

FAST = timedelta(milliseconds=20)
WAIT = timedelta(seconds=20)
SHORT = timedelta(milliseconds=50)


@dataclass(frozen=True)
class Engine:
    runtime: LocalRuntime
    flow: AgentSessionFlow
    sync: SyncLocalFlowClient


@pytest.fixture(params=["memory", "sqlite"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    gate = threading.Event()
    flow = make_flow(gate)
    path = None if request.param == "memory" else tmp_path / "sessions.sqlite3"
    async with LocalRuntime(path, [flow], poll_interval=FAST) as runtime:
        try:
            yield Engine(runtime, flow, open_sync_flow_client(runtime))
        finally:
            gate.set()


async def test_a_waiting_read_wakes_when_a_turn_writes_an_event(engine: Engine) -> None:
    sessions = engine.runtime.sessions(engine.flow)
    await sessions.start_session("s-1")
    read = asyncio.create_task(
        asyncio.to_thread(engine.sync.read_stream, engine.flow, "s-1", "", WAIT)
    )
    assert await sessions.send_user_message("s-1", "hello")
    async with asyncio.timeout(WAIT.total_seconds()):
        message = await read
    assert message.value.type == "turn_started"
    same = await engine.runtime.flow_client.read_stream(engine.flow, "s-1", "", WAIT)
    assert message == same


async def test_a_quiet_read_times_out_after_its_poll_timeout(engine: Engine) -> None:
    await engine.runtime.sessions(engine.flow).start_session("s-1")
    # A guard against a read that never ends, 400 times its poll timeout: no measure of speed.
    with pytest.raises(StreamReadTimeoutError):
        async with asyncio.timeout(WAIT.total_seconds()):
            await asyncio.to_thread(engine.sync.read_stream, engine.flow, "s-1", "", SHORT)


async def test_a_read_that_would_wait_on_the_event_loop_is_refused(engine: Engine) -> None:
    sessions = engine.runtime.sessions(engine.flow)
    await sessions.start_session("s-1", "hello")
    await sessions.wait_for_user("s-1", timeout=WAIT)
    tail = await engine.runtime.flow_client.stream_tail_token(engine.flow, "s-1")
    # On the runtime's own loop the wait froze the workers that would write the event, and
    # it ended in StreamReadTimeoutError after the whole poll_timeout.
    with pytest.raises(RuntimeError, match="would block this thread's running event loop"):
        engine.sync.read_stream(engine.flow, "s-1", tail, WAIT)
    # An event that is there is read at once, and the same wait from a thread is fine.
    assert engine.sync.read_stream(engine.flow, "s-1", "", WAIT).value.type == "turn_started"
    read = asyncio.create_task(
        asyncio.to_thread(engine.sync.read_stream, engine.flow, "s-1", tail, WAIT)
    )
    assert await sessions.send_user_message("s-1", "again")
    assert (await read).value.type == "turn_started"


async def test_a_zero_poll_timeout_reads_once_without_waiting(engine: Engine) -> None:
    sessions = engine.runtime.sessions(engine.flow)
    await sessions.start_session("s-1", "hello")
    await sessions.wait_for_user("s-1", timeout=WAIT)
    client, flow = engine.runtime.flow_client, engine.flow
    zero = timedelta(0)
    first = await client.read_stream(flow, "s-1", "", zero)  # an event that is there
    assert first == await asyncio.to_thread(engine.sync.read_stream, flow, "s-1", "", zero)
    tail = await client.stream_tail_token(flow, "s-1")
    # Nothing after the tail: both clients say so at once (they waited the 30 s default).
    async with asyncio.timeout(WAIT.total_seconds()):
        with pytest.raises(StreamReadTimeoutError):
            await client.read_stream(flow, "s-1", tail, zero)
        with pytest.raises(StreamReadTimeoutError):
            await asyncio.to_thread(engine.sync.read_stream, flow, "s-1", tail, zero)
    refused = "poll_timeout must be None or a timedelta of 0 or more"
    with pytest.raises(ValueError, match=refused):
        await client.read_stream(flow, "s-1", tail, timedelta(seconds=-1))
    with pytest.raises(ValueError, match=refused):
        engine.sync.read_stream(flow, "s-1", tail, timedelta(seconds=-1))


async def test_a_bad_token_or_an_unknown_session_is_refused(engine: Engine) -> None:
    sessions = engine.runtime.sessions(engine.flow)
    await sessions.start_session("s-1")
    await sessions.start_session("s-2", "hello")
    await sessions.wait_for_user("s-2", timeout=WAIT)
    foreign = (
        await engine.runtime.flow_client.read_stream(engine.flow, "s-2", "", WAIT)
    ).resume_token
    for token in (foreign, "garbage"):
        with pytest.raises(InvalidResumeTokenError):
            engine.sync.read_stream(engine.flow, "s-1", token, SHORT)
    with pytest.raises(FlowNotFoundError):
        engine.sync.read_stream(engine.flow, "nobody", "", SHORT)
    with pytest.raises(FlowNotFoundError):
        engine.sync.list_stream_messages(engine.flow, "nobody", 10)


async def test_rpcs_and_pages_match_the_async_client(engine: Engine) -> None:
    sessions = engine.runtime.sessions(engine.flow)
    await sessions.start_session("s-1")
    # A write through the sync client reaches the worker at its next poll.
    sent = await asyncio.to_thread(
        engine.sync.invoke_rpc,
        engine.flow,
        "s-1",
        "send_user_message",
        AgentUserMessage(text="hello"),
    )
    assert sent is True
    done = await sessions.wait_for_user("s-1", timeout=WAIT)
    assert done.messages[-1].text == "echo: hello"
    snapshot = await asyncio.to_thread(
        engine.sync.invoke_rpc, engine.flow, "s-1", "get_agent_snapshot", None
    )
    assert snapshot == await sessions.get_agent_snapshot("s-1")
    pages = LocalStreamPageReader(engine.runtime.flow_client.engine)
    page = await pages.list_stream_messages(engine.flow, "s-1", 2)
    assert engine.sync.list_stream_messages(engine.flow, "s-1", 2) == page
    assert [message.value.type for message in page.messages] == ["turn_completed", "usage_recorded"]
    older = engine.sync.list_stream_messages(engine.flow, "s-1", 2, page.next_page_token)
    assert [message.value.type for message in older.messages] == ["text_delta", "turn_started"]
    assert older.next_page_token == ""


async def test_the_sync_and_async_snapshots_agree(engine: Engine) -> None:
    sessions = engine.runtime.sessions(engine.flow)
    await sessions.start_session("s-1", "hello")
    await sessions.wait_for_user("s-1", timeout=WAIT)
    value = await read_agent_event_stream_snapshot(engine.runtime.flow_client, engine.flow, "s-1")
    again = await asyncio.to_thread(
        read_agent_event_stream_snapshot_sync, engine.sync, engine.flow, "s-1"
    )
    assert value == again
    assert value == await read_agent_event_stream_snapshot(sessions, engine.flow, "s-1")
    assert value.to_json()["snapshot"]["messages"][-1]["text"] == "echo: hello"


async def test_a_sync_client_is_refused_by_the_async_helpers_and_the_reverse(
    engine: Engine,
) -> None:
    flow = engine.flow
    with pytest.raises(TypeError, match="synchronous"):
        await read_agent_event_stream_snapshot(engine.sync, flow, "s-1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="synchronous"):
        await stream_agent_event_frames(engine.sync, flow, "s-1")  # type: ignore[arg-type]
    for client in (engine.runtime.flow_client, engine.runtime.sessions(flow)):
        with pytest.raises(TypeError, match="asynchronous"):
            read_agent_event_stream_snapshot_sync(client, flow, "s-1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="asynchronous"):
            stream_agent_event_frames_sync(client, flow, "s-1")  # type: ignore[arg-type]


async def test_arguments_are_checked_before_anything_is_read(engine: Engine) -> None:
    client, flow = engine.runtime.flow_client, engine.flow
    with pytest.raises(InvalidSessionIdError):
        await read_agent_event_stream_snapshot(client, flow, "a/b")
    with pytest.raises(InvalidSessionIdError):
        await stream_agent_event_frames(client, flow, "")
    with pytest.raises(TypeError, match="resume_token"):
        stream_agent_event_frames_sync(engine.sync, flow, "s-1", resume_token=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="poll_timeout"):
        await stream_agent_event_frames(client, flow, "s-1", poll_timeout=timedelta(0))
    with pytest.raises(ValueError, match=r"^wake_interval must be positive, not 0:00:00$"):
        SyncLocalFlowClient(client.engine, wake_interval=timedelta(0))
    with pytest.raises(ValueError, match=r"^wake_interval must be a positive timedelta, not 0.05$"):
        engine.runtime.sync_flow_client(wake_interval=0.05)  # type: ignore[arg-type]


async def test_a_flow_given_as_its_type_name_is_refused_by_every_helper(engine: Engine) -> None:
    # Each failed with "'str' object has no attribute 'flow_type'".
    client, sync, name = engine.runtime.flow_client, engine.sync, engine.flow.flow_type
    refused = rf"flow must be a session Flow \(an AgentSessionFlow\), not str \('{name}'\)$"
    with pytest.raises(TypeError, match=rf"^read_agent_event_stream_snapshot: {refused}"):
        await read_agent_event_stream_snapshot(client, name, "s-1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=rf"^stream_agent_event_frames: {refused}"):
        await stream_agent_event_frames(client, name, "s-1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=rf"^read_agent_event_stream_snapshot_sync: {refused}"):
        read_agent_event_stream_snapshot_sync(sync, name, "s-1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=rf"^stream_agent_event_frames_sync: {refused}"):
        stream_agent_event_frames_sync(sync, name, "s-1")  # type: ignore[arg-type]


async def test_a_refused_token_raises_before_the_stream_starts(engine: Engine) -> None:
    await engine.runtime.sessions(engine.flow).start_session("s-1")
    with pytest.raises(InvalidAgentEventResumeTokenError) as caught:
        await stream_agent_event_frames(
            engine.runtime.flow_client, engine.flow, "s-1", resume_token="garbage"
        )
    assert isinstance(caught.value.__cause__, InvalidResumeTokenError)
    with pytest.raises(InvalidAgentEventResumeTokenError):
        stream_agent_event_frames_sync(engine.sync, engine.flow, "s-1", resume_token="garbage")
