"""``GET /api/events``: several sessions' event streams on one connection, as a browser's
session pages share it (``dex_agents.console.shared_streams``)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.console.shared_streams import BUFFERED_FRAMES, MAX_SHARED_STREAMS, shared_frames
from dex_agents.ui_stream import AGENT_EVENT_STREAM_HEADERS, KEEP_ALIVE_FRAME
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot
from tests.support.uvicorn_servers import serve_with_uvicorn
from tests.ui_stream.sse import Frame, FrameReader


def _shared(frame: Frame) -> dict[str, Any]:
    assert frame.data is not None
    body: dict[str, Any] = json.loads(frame.data)
    return body


def _event_type(frame: Frame, key: str) -> str | None:
    if frame.data is None or _shared(frame)["stream"] != key:
        return None
    body = _shared(frame)
    return str(json.loads(body["data"])["type"]) if body["kind"] == "event" else body["kind"]


async def _finished_session(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    start = {"session_id": session_id, "message": f"hello {session_id}"}
    await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
    return await eventually(
        lambda: snapshot(client, session_id),
        lambda body: (
            body["snapshot"]["state"]["active_turn_id"] is None
            and body["snapshot"]["state"]["turn_count"] == 1
        ),
    )


async def test_each_stream_of_the_connection_sends_its_session_and_a_refused_one_says_why(
    tmp_path: Path,
) -> None:
    async def authorize(request: Request, session_id: str) -> bool:
        return session_id != "secret"

    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], authorize=authorize)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await _finished_session(client, "a")
        # A token of another session the caller may see reads none of its events here.
        other = (await _finished_session(client, "b"))["resume_token"]
        streams = {
            "page-a": {"session_id": "a", "resume_token": ""},
            "page-nobody": {"session_id": "nobody", "resume_token": ""},
            "page-bad-token": {"session_id": "a", "resume_token": "not a token"},
            "page-b-token": {"session_id": "a", "resume_token": other},
            "page-secret": {"session_id": "secret", "resume_token": ""},
        }
        params = {"streams": json.dumps(streams)}
        async with client.stream("GET", "/api/events", params=params) as response:
            assert response.status_code == 200
            reader = FrameReader(response)
            read = await reader.until(lambda f: _event_type(f, "page-a") == "turn_completed")
        refused = {
            _shared(f)["stream"]: _shared(f)["status"]
            for f in read
            if f.data is not None and _shared(f)["kind"] == "error"
        }
        assert refused == {
            "page-nobody": 404,
            "page-bad-token": 400,
            "page-b-token": 400,
            "page-secret": 403,
        }
        events = [_shared(f) for f in read if _event_type(f, "page-a") is not None]
        assert json.loads(events[0]["data"])["type"] == "turn_started"
        # Each event carries its token: the worker resumes its page's stream from it.
        resumed = {"page-a": {"session_id": "a", "resume_token": events[0]["id"]}}
        params = {"streams": json.dumps(resumed)}
        async with client.stream("GET", "/api/events", params=params) as response:
            reader = FrameReader(response)
            again = await reader.until(lambda f: _event_type(f, "page-a") == "turn_completed")
        assert [_shared(f)["id"] for f in again if f.data is not None] == [
            e["id"] for e in events[1:]
        ]


async def test_streams_that_are_not_json_naming_sessions_are_refused(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        nested = "[" * 3000  # deeper than the JSON parser goes: it answered 500
        for streams in [
            "",
            "[]",
            "{}",
            '{"k": {"resume_token": ""}}',
            '{"k": {"session_id": 1}}',
            nested,
        ]:
            answer = await client.get("/api/events", params={"streams": streams})
            assert answer.status_code == 400, streams
            assert "streams must be JSON" in answer.json()["reason"]


async def test_a_stream_whose_read_fails_is_logged_and_its_page_told_while_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing() -> AsyncGenerator[str, None]:
        yield KEEP_ALIVE_FRAME
        raise OSError("disk gone")

    async def working() -> AsyncGenerator[str, None]:
        yield 'id: t1\ndata: {"type": "text_delta"}\n\n'
        yield 'event: session_ended\ndata: {"status": "stopped"}\n\n'

    chunks = [chunk async for chunk in shared_frames({"a": failing(), "b": working(), "c": 404})]
    frames = "".join(chunks).split("\n\n")  # a chunk holds every frame ready when made
    bodies = [
        json.loads(frame.removeprefix("data: ")) for frame in frames if frame.startswith("data: ")
    ]
    assert {"stream": "c", "kind": "error", "status": 404} in bodies
    assert {"stream": "a", "kind": "error", "status": 503} in bodies
    assert {"stream": "b", "kind": "event", "id": "t1", "data": '{"type": "text_delta"}'} in bodies
    assert {"stream": "b", "kind": "session_ended", "data": '{"status": "stopped"}'} in bodies
    assert len(bodies) == 4
    assert "the event stream of a failed" in caplog.text
    assert "disk gone" in caplog.text


async def test_a_connection_that_is_not_read_stops_its_streams_reads() -> None:
    # Each session's frames were read as fast as they came and queued for the connection:
    # a browser that stopped reading it left the server keeping every event since.
    read = 0

    async def endless() -> AsyncGenerator[str, None]:
        nonlocal read
        while True:
            read += 1
            yield f'id: t{read}\ndata: {{"n": {read}}}\n\n'
            await asyncio.sleep(0)

    frames = shared_frames({"a": endless(), "b": endless()})
    try:
        assert '"id": "t1"' in await anext(frames)
        for _ in range(1000):  # the pumps' turns, while the connection takes no frame
            await asyncio.sleep(0)
        assert read <= BUFFERED_FRAMES + 4, read
    finally:
        await frames.aclose()


async def test_a_connection_its_client_reset_is_written_to_once_not_once_a_frame(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The frames of many streams ready at once were written one by one in one go: once the
    # browser had reset the connection, each write after the first logged asyncio's
    # "socket.send() raised exception" (about 96 lines for a page of 100 streams).
    sources: list[asyncio.Queue[str]] = [asyncio.Queue() for _ in range(MAX_SHARED_STREAMS)]
    closed: list[str] = []

    async def follow(key: str, source: asyncio.Queue[str]) -> AsyncGenerator[str, None]:
        try:
            while True:
                yield await source.get()
        finally:
            closed.append(key)

    async def events(request: Request) -> Response:
        opened = {f"k{n}": follow(f"k{n}", source) for n, source in enumerate(sources)}
        frames = shared_frames(dict(opened))
        return StreamingResponse(frames, headers=dict(AGENT_EVENT_STREAM_HEADERS))

    app = Starlette(routes=[Route("/events", events)])
    loop = asyncio.get_running_loop()
    async with serve_with_uvicorn(app) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.socket() as client:
            client.setblocking(False)
            await loop.sock_connect(client, (host, int(port)))
            await loop.sock_sendall(client, b"GET /events HTTP/1.1\r\nHost: console\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += await loop.sock_recv(client, 4096)
            assert head.startswith(b"HTTP/1.1 200")
            # Every stream's next frame ready, and the connection reset, in one step of the
            # loop: the server meets both at its next.
            for source in sources:
                source.put_nowait('id: t1\ndata: {"type": "text_delta"}\n\n')
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await eventually(lambda: asyncio.sleep(0, len(closed)), lambda count: count == len(sources))
    sent = [r for r in caplog.records if "socket.send() raised exception" in r.getMessage()]
    assert sent == []
