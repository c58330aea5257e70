"""The console's event stream routes: one session's, and several sessions' on one connection.

- ``GET /api/sessions/{id}/events``: the session's ``AgentEvents`` as SSE, until
  ``close_event_streams(app)`` (503 after it), or until the session no longer runs
  (a last ``session_ended`` event; ``streams.until_session_ends``).
- ``GET /api/events?streams=...``: several sessions' events on one connection, each
  authorized, as ``shared_streams`` describes: the pages of one browser share it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import timedelta

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from dex_agents.console.catalog import ConsoleFlow, SessionCatalog
from dex_agents.console.responses import JSONResponse
from dex_agents.console.shared_streams import requested_streams, shared_frames
from dex_agents.console.streams import REMOVED, StreamGate, until_session_ends
from dex_agents.domain.errors import DexAgentsError
from dex_agents.ports.errors import FlowNotFoundError
from dex_agents.ui_stream import (
    AGENT_EVENT_STREAM_HEADERS,
    InvalidAgentEventResumeTokenError,
    stream_agent_event_frames,
)

# The read after a stream's session ended waits no longer than this for an event that is
# not there: every event the session wrote is stored by then.
_LAST_READ_POLL = timedelta(milliseconds=1)

SessionFlow = Callable[[Request, str], Awaitable[ConsoleFlow | Response]]
"""``session_flow(request, session_id)``: the served Flow of the session, or the answer
its routes give when there is none (404, 409)."""

Authorize = Callable[[Request, str], Awaitable[bool]]
"""``authorize(request, session_id)``, as ``dex_agents.console.app.Authorize``, which is this."""


class EventRoutes:
    """The two routes' handlers, over the app's stream gate, authorize hook and long poll."""

    def __init__(
        self,
        gate: StreamGate,
        authorize: Authorize,
        poll_timeout: timedelta,
        session_flow: SessionFlow,
    ) -> None:
        self._gate = gate
        self._authorize = authorize
        self._poll_timeout = poll_timeout
        self._session_flow = session_flow

    async def events(self, request: Request) -> Response:
        """One session's stream, from ``Last-Event-ID`` or ``resume_token``."""
        resume_token = request.headers.get("last-event-id") or request.query_params.get(
            "resume_token", ""
        )
        opened = await self._frames(request, request.path_params["session_id"], resume_token)
        if isinstance(opened, Response):
            return opened
        if request.method == "HEAD":
            # The stream never ends by itself: answering HEAD with it held the connection, and
            # the client's next request on it, until the server stopped.
            await opened.aclose()
            return Response(headers=dict(AGENT_EVENT_STREAM_HEADERS))
        return StreamingResponse(opened, headers=dict(AGENT_EVENT_STREAM_HEADERS))

    async def shared_events(self, request: Request) -> Response:
        """The streams ``streams`` names, each authorized, on one connection."""
        if self._gate.closed:
            return PlainTextResponse("the console is stopping", status_code=503)
        streams = requested_streams(request.query_params.get("streams", ""))
        if streams is None:
            reason = "streams must be JSON naming each stream's session_id and resume_token"
            return JSONResponse({"ok": False, "reason": reason}, status_code=400)
        opened: dict[str, AsyncGenerator[str, None] | int] = {}
        for key, stream in streams.items():
            if not await self._authorize(request, stream.session_id):
                opened[key] = 403
                continue
            frames = await self._frames(request, stream.session_id, stream.resume_token)
            opened[key] = frames.status_code if isinstance(frames, Response) else frames
        if request.method == "HEAD":
            # As the one session's route: the streams never end by themselves.
            for each in opened.values():
                if not isinstance(each, int):
                    await each.aclose()
            return Response(headers=dict(AGENT_EVENT_STREAM_HEADERS))
        return StreamingResponse(shared_frames(opened), headers=dict(AGENT_EVENT_STREAM_HEADERS))

    async def _frames(
        self, request: Request, session_id: str, resume_token: str
    ) -> AsyncGenerator[str, None] | Response:
        # The session's frames from resume_token until it ends or the console stops, or the
        # answer its own route gives instead.
        if self._gate.closed:
            return PlainTextResponse("the console is stopping", status_code=503)
        entry = await self._session_flow(request, session_id)
        if isinstance(entry, Response):
            return entry
        try:
            frames = await stream_agent_event_frames(
                entry.runtime.flow_client,
                entry.flow,
                session_id,
                resume_token=resume_token,
                poll_timeout=self._poll_timeout,
            )
        except InvalidAgentEventResumeTokenError:
            return Response(status_code=400)
        except DexAgentsError as error:
            # As the snapshot route answers for the same session (an ID the engine took that
            # the session rules refuse, say).
            return JSONResponse({"ok": False, "reason": str(error)}, status_code=409)
        catalog: SessionCatalog = request.app.state.catalog

        async def status() -> str:
            try:
                return (await catalog.describe(session_id)).status
            except FlowNotFoundError:
                return REMOVED

        async def frames_after(token: str) -> AsyncGenerator[str, None]:
            return await stream_agent_event_frames(
                entry.runtime.flow_client,
                entry.flow,
                session_id,
                resume_token=token,
                poll_timeout=_LAST_READ_POLL,
            )

        return self._gate.passing(until_session_ends(frames, status, frames_after, resume_token))
