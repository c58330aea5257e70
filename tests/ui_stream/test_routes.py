"""The README's browser stream routes over real HTTP on loopback, on Starlette and on Flask.

Each test runs a scripted agent on ``LocalRuntime`` with an SQLite file, serves
the routes (Starlette under uvicorn with the async helpers, Flask under
werkzeug's threaded server with ``open_sync_flow_client``) and drives them with
httpx as a browser's ``EventSource`` would: the snapshot, the event stream from
its token, and a reconnect with ``Last-Event-ID``.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.composition.sync_session_client import open_sync_flow_client
from dex_agents.domain.wire import to_wire
from dex_agents.local import LocalRuntime
from dex_agents.ports.flow_client import FlowClient, StreamMessage
from dex_agents.ui_stream import (
    BROWSER_HIDDEN_MESSAGE_FIELDS,
    BROWSER_HIDDEN_TOOL_CALL_FIELDS,
    KEEP_ALIVE_FRAME,
)
from tests.ui_stream.agent import UNDECODABLE_FILE, make_flow
from tests.ui_stream.servers import (
    OpenStreams,
    flask_app,
    serve_asgi,
    serve_wsgi,
    starlette_app,
)
from tests.ui_stream.sse import Frame, FrameReader, events_only, is_type

FAST = timedelta(milliseconds=20)
WAIT = timedelta(seconds=20)
TURN_EVENTS = ["turn_started", "text_delta", "usage_recorded", "turn_completed"]


@dataclass(frozen=True)
class Served:
    """A runtime with the routes served over HTTP."""

    http: httpx.AsyncClient
    runtime: LocalRuntime
    flow: AgentSessionFlow
    sessions: AgentSessionClient
    gate: threading.Event


@pytest.fixture(params=["starlette", "flask"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    gate = threading.Event()
    flow = make_flow(gate)
    async with LocalRuntime(tmp_path / "sessions.sqlite3", [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        try:
            if request.param == "starlette":
                # The AgentSessionClient, for convenience; the FlowClient works the same.
                server = serve_asgi(starlette_app(sessions, flow))
            else:
                streams = OpenStreams()
                server = serve_wsgi(
                    flask_app(open_sync_flow_client(runtime), flow, streams), streams
                )
            async with (
                server as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=10) as http,
            ):
                yield Served(http, runtime, flow, sessions, gate)
        finally:
            gate.set()


async def snapshot_of(served: Served, session_id: str) -> dict[str, Any]:
    response = await served.http.get(f"/sessions/{session_id}/snapshot")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    assert sorted(body) == ["resume_token", "snapshot"]
    return body


async def idle_session(served: Served, session_id: str, initial_message: str = "") -> None:
    """Start a session and, with a first message, wait until its first turn ended.

    Without one there is no event to wait for (``wait_for_user`` would only see the
    start at its next snapshot recheck), and a message sent later queues anyway.
    """
    await served.sessions.start_session(session_id, initial_message)
    if initial_message:
        await served.sessions.wait_for_user(session_id, timeout=WAIT)


async def events_after(
    client: FlowClient, flow: AgentSessionFlow, session_id: str, token: str, count: int
) -> list[StreamMessage[Any]]:
    """The next ``count`` events after ``token``, read straight from the engine."""
    read: list[StreamMessage[Any]] = []
    for _ in range(count):
        message = await client.read_stream(flow, session_id, token, poll_timeout=WAIT)
        read.append(message)
        token = message.resume_token
    return read


def wire_event(message: StreamMessage[Any]) -> dict[str, Any]:
    event: dict[str, Any] = to_wire(message.value)
    return event


def types_of(frames: list[Frame]) -> list[str | None]:
    return [frame.type for frame in frames]


async def test_the_frames_of_a_scripted_turn_are_its_events_in_order(served: Served) -> None:
    await idle_session(served, "s-1")
    token = (await snapshot_of(served, "s-1"))["resume_token"]
    url = "/sessions/s-1/events"
    async with served.http.stream("GET", url, params={"resume_token": token}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache, no-transform"
        reader = FrameReader(response)
        assert await served.sessions.send_user_message("s-1", "hello")
        frames = events_only(await reader.until(is_type("turn_completed")))
    assert types_of(frames) == TURN_EVENTS
    truth = await events_after(served.runtime.flow_client, served.flow, "s-1", token, len(frames))
    assert [frame.id for frame in frames] == [message.resume_token for message in truth]
    assert [frame.event for frame in frames] == [wire_event(message) for message in truth]
    assert frames[1].event["payload"] == {"text": "echo: hello"}
    assert all(frame.raw.startswith(f"id: {frame.id}\ndata: {{") for frame in frames)


async def test_an_idle_stream_sends_keep_alive_comments(served: Served) -> None:
    await idle_session(served, "s-1", "hello")
    token = (await snapshot_of(served, "s-1"))["resume_token"]
    assert token != ""
    url = "/sessions/s-1/events"
    async with served.http.stream("GET", url, params={"resume_token": token}) as response:
        reader = FrameReader(response)
        frames = [await reader.next_frame() for _ in range(3)]
    assert [frame.raw for frame in frames] == [KEEP_ALIVE_FRAME] * 3


@pytest.mark.parametrize("where", ["query", "last-event-id"])
async def test_a_token_of_another_session_is_answered_400(served: Served, where: str) -> None:
    await idle_session(served, "s-1")
    await idle_session(served, "s-2", "hello")
    foreign = (await snapshot_of(served, "s-2"))["resume_token"]
    assert foreign != ""
    for token in (foreign, "not-a-token"):
        if where == "query":
            response = await served.http.get("/sessions/s-1/events", params={"resume_token": token})
        else:
            response = await served.http.get(
                "/sessions/s-1/events", headers={"Last-Event-ID": token}
            )
        assert response.status_code == 400


async def test_a_snapshot_mid_turn_replays_the_turn_and_hides_the_steps_fields(
    served: Served,
) -> None:
    await idle_session(served, "s-1", "hello")
    idle_token = (await snapshot_of(served, "s-1"))["resume_token"]
    url = "/sessions/s-1/events"
    async with served.http.stream("GET", url, params={"resume_token": idle_token}) as response:
        reader = FrameReader(response)
        assert await served.sessions.send_user_message("s-1", "hold")
        live = events_only(await reader.until(is_type("tool_call_started")))
    body = await snapshot_of(served, "s-1")
    snapshot = body["snapshot"]
    assert snapshot["state"]["active_turn_id"] == "turn-2"
    assert snapshot["messages"]
    assert snapshot["tool_calls"]
    for message in snapshot["messages"]:
        assert not set(BROWSER_HIDDEN_MESSAGE_FIELDS) & set(message)
        assert "text" in message
    for call in snapshot["tool_calls"]:
        assert not set(BROWSER_HIDDEN_TOOL_CALL_FIELDS) & set(call)
        assert call["tool_name"] == "hold"
    assert "Secret instructions" not in str(snapshot)
    async with served.http.stream(
        "GET", url, params={"resume_token": body["resume_token"]}
    ) as response:
        replayed = events_only(await FrameReader(response).until(is_type("tool_call_started")))
    # The mid-turn token replays exactly this turn's events so far.
    assert replayed[0].type == "turn_started"
    assert [frame.id for frame in replayed] == [frame.id for frame in live]
    assert {frame.event["turn_id"] for frame in replayed} == {"turn-2"}


async def test_a_reconnect_with_last_event_id_mid_turn_neither_repeats_nor_misses_an_event(
    served: Served,
) -> None:
    await idle_session(served, "s-1")
    start = (await snapshot_of(served, "s-1"))["resume_token"]
    url = "/sessions/s-1/events"
    async with served.http.stream("GET", url, params={"resume_token": start}) as response:
        reader = FrameReader(response)
        assert await served.sessions.send_user_message("s-1", "hold")
        before = events_only(await reader.until(is_type("tool_call_started")))
    # The browser is away while the turn goes on and ends.
    served.gate.set()
    await served.sessions.wait_for_user("s-1", timeout=WAIT)
    # EventSource repeats its URL and adds Last-Event-ID, which the route prefers.
    headers = {"Last-Event-ID": before[-1].id or ""}
    async with served.http.stream(
        "GET", url, params={"resume_token": start}, headers=headers
    ) as response:
        after = events_only(await FrameReader(response).until(is_type("turn_completed")))
    frames = before + after
    truth = await events_after(served.runtime.flow_client, served.flow, "s-1", start, len(frames))
    assert [frame.id for frame in frames] == [message.resume_token for message in truth]
    assert [frame.event for frame in frames] == [wire_event(message) for message in truth]
    assert types_of(after)[0] == "tool_call_finished"
    assert types_of(after)[-1] == "turn_completed"


async def test_text_with_a_lone_surrogate_from_a_tool_is_served_as_the_replacement_character(
    served: Served,
) -> None:
    # The spec's routes serve to_json() with the framework's JSON: Starlette's writes text as
    # UTF-8, which a lone surrogate has no form in, and answered 500 to every read of the session.
    await idle_session(served, "s-1", "files")
    body = await snapshot_of(served, "s-1")
    shown = "done: report-\ufffd.txt"
    assert [m["text"] for m in body["snapshot"]["messages"]][-1] == shown
    # The event frames carry the text escaped, which a browser shows as the same character.
    async with served.http.stream("GET", "/sessions/s-1/events") as response:
        frames = events_only(await FrameReader(response).until(is_type("turn_completed")))
    deltas = [frame.event["payload"]["text"] for frame in frames if frame.type == "text_delta"]
    assert deltas == [f"done: {UNDECODABLE_FILE}"]
    assert deltas[0].encode("utf-16", "surrogatepass").decode("utf-16", "replace") == shown
    # Only the browser's view is replaced: the session keeps the text as the tool gave it.
    stored = await served.sessions.get_agent_snapshot("s-1")
    assert stored.messages[-1].text == f"done: {UNDECODABLE_FILE}"
