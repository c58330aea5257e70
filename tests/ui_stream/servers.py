"""The spec's routes on real servers: Starlette under uvicorn and Flask under werkzeug's threaded server.

Both listen on 127.0.0.1 at a port the OS picks. The routes are the README's,
plus ``poll_timeout`` so keep-alive comments come fast, and the Flask app
counts its open streams, so a test can wait until every stream's thread let
go of the engine before the runtime closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

from flask import Flask, Response, request
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.responses import Response as StarletteResponse
from starlette.routing import Route
from werkzeug.serving import make_server

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.ports.flow_client import FlowClient
from dex_agents.ui_stream import (
    AGENT_EVENT_STREAM_HEADERS,
    InvalidAgentEventResumeTokenError,
    SyncFlowClient,
    read_agent_event_stream_snapshot,
    read_agent_event_stream_snapshot_sync,
    stream_agent_event_frames,
    stream_agent_event_frames_sync,
)
from tests.support.uvicorn_servers import serve_with_uvicorn

POLL_TIMEOUT = timedelta(milliseconds=100)
STOP_DEADLINE_SECONDS = 10.0


def starlette_app(client: FlowClient | AgentSessionClient, flow: AgentSessionFlow) -> Starlette:
    """The README's Starlette routes over an async client."""

    async def get_session_snapshot(request: Request) -> JSONResponse:
        session_id = request.path_params["session_id"]
        value = await read_agent_event_stream_snapshot(client, flow, session_id)
        return JSONResponse(value.to_json())

    async def get_session_events(request: Request) -> StarletteResponse:
        session_id = request.path_params["session_id"]
        resume_token = request.headers.get("last-event-id") or request.query_params.get(
            "resume_token", ""
        )
        try:
            frames = await stream_agent_event_frames(
                client,
                flow,
                session_id,
                resume_token=resume_token,
                poll_timeout=POLL_TIMEOUT,
            )
        except InvalidAgentEventResumeTokenError:
            return StarletteResponse(status_code=400)
        return StreamingResponse(frames, headers=dict(AGENT_EVENT_STREAM_HEADERS))

    return Starlette(
        routes=[
            Route("/sessions/{session_id}/snapshot", get_session_snapshot),
            Route("/sessions/{session_id}/events", get_session_events),
        ]
    )


def serve_asgi(app: Starlette) -> contextlib.AbstractAsyncContextManager[str]:
    """Serve ``app`` with uvicorn as a task of this loop; yield its base URL."""
    return serve_with_uvicorn(app)


class OpenStreams:
    """How many event streams a WSGI app is serving; a test waits for none."""

    def __init__(self) -> None:
        self._count = 0
        self._changed = threading.Condition()

    def track(self, frames: Iterator[str]) -> Iterator[str]:
        """``frames``, counted open until the server closes them."""
        with self._changed:
            self._count += 1
        try:
            yield from frames
        finally:
            with self._changed:
                self._count -= 1
                self._changed.notify_all()

    def wait_for_none(self, timeout: float) -> bool:
        """Whether every stream closed within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self._count == 0, timeout)


def flask_app(sync_client: SyncFlowClient, flow: AgentSessionFlow, streams: OpenStreams) -> Flask:
    """The README's Flask routes over a synchronous client."""
    app = Flask(__name__)

    @app.get("/sessions/<session_id>/snapshot")
    def get_session_snapshot(session_id: str) -> dict[str, Any]:
        return read_agent_event_stream_snapshot_sync(sync_client, flow, session_id).to_json()

    @app.get("/sessions/<session_id>/events")
    def get_session_events(session_id: str) -> Response:
        resume_token = request.headers.get("Last-Event-ID") or request.args.get("resume_token", "")
        try:
            frames = stream_agent_event_frames_sync(
                sync_client,
                flow,
                session_id,
                resume_token=resume_token,
                poll_timeout=POLL_TIMEOUT,
            )
        except InvalidAgentEventResumeTokenError:
            return Response(status=400)
        return Response(streams.track(frames), headers=dict(AGENT_EVENT_STREAM_HEADERS))

    return app


@contextlib.asynccontextmanager
async def serve_wsgi(app: Flask, streams: OpenStreams) -> AsyncIterator[str]:
    """Serve ``app`` with werkzeug's threaded server in a thread; yield its base URL.

    On exit it waits until every event stream closed (a stream's thread notices
    a gone browser at its next frame, within ``POLL_TIMEOUT``), then stops.
    """
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        closed = await asyncio.to_thread(streams.wait_for_none, STOP_DEADLINE_SECONDS)
        server.shutdown()
        thread.join(STOP_DEADLINE_SECONDS)
        server.server_close()
        assert closed, "an event stream of the WSGI app stayed open"
