"""``create_console_app``: the console as a Starlette ASGI app over one session database.

Routes (all under the token or loopback rule of ``dex_agents.console.security``;
every ``POST`` also under its cross-site rule; every route naming a session
under the application's ``authorize`` hook):

- ``GET /`` and ``GET /sessions/{id}``: the page (``static/index.html``).
- ``GET /static/{name}``: its style sheet and JavaScript modules, with no token.
- ``GET /api/sessions``: the inbox, sessions that need a person first, and the Flow
  types a new session can have (``flow_types``; ``plan_mode_flow_types`` take plan mode).
- ``POST /api/sessions``: start a session of a Flow this process serves.
- ``GET /api/sessions/{id}/snapshot``: ``read_agent_event_stream_snapshot`` JSON
  plus ``console`` (Flow type, whether it is writable, status, whether it takes plan mode,
  and ``plan_approvals``: which user messages are a plan's approval, ``transcript``).
- ``GET /api/sessions/{id}/events`` and ``GET /api/events``: event streams, one
  session's or several on one connection (``event_routes``).
- ``GET /api/sessions/{id}/worker``: ``{"worker": ...}``, what this process's worker runs
  the session's turns with (``worker_setup.WorkerSetup``), or ``null`` when it does not
  run them (a session that ended, a Flow type it does not serve, ``workers=0``) or was not told;
  500 with ``{"ok": false, "reason": ...}`` when the ``worker_setup`` hook fails.
- ``POST /api/sessions/{id}/controls/{name}``: one of ``actions.CONTROLS``;
  answers ``{"ok": bool, "reason": str | null}``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from dex_agents.adapters.local.engine import DEFAULT_LEASE_DURATION
from dex_agents.composition.session_flow import AgentSessionFlow
from dex_agents.console.actions import CONTROLS, ControlInputError, run_control
from dex_agents.console.catalog import ConsoleFlow, SessionCatalog, open_catalog
from dex_agents.console.event_routes import Authorize as EventRoutesAuthorize
from dex_agents.console.event_routes import EventRoutes
from dex_agents.console.messages import messages_page
from dex_agents.console.page_files import StaticFiles, page_response
from dex_agents.console.read_only import ended, read_only_reason
from dex_agents.console.request_checks import json_body, refusal
from dex_agents.console.responses import JSONResponse
from dex_agents.console.security import TOKEN_COOKIE, check_console_token, token_matches
from dex_agents.console.streams import StreamGate
from dex_agents.console.transcript import plan_approvals
from dex_agents.console.worker_setup import (
    GuardedWorkerSetup,
    ReadWorkerSetup,
    WorkerSetupUnreadable,
)
from dex_agents.domain.errors import DexAgentsError
from dex_agents.ports.errors import FlowAlreadyStartedError, FlowNotFoundError
from dex_agents.ui_stream import (
    DEFAULT_AGENT_EVENT_POLL_TIMEOUT,
    read_agent_event_stream_snapshot,
)

Authorize = EventRoutesAuthorize
"""``authorize(request, session_id)``: whether the caller may see and steer the session.

The console calls it for every session it lists, shows, streams, starts or
controls, after its own token or loopback check.
"""


async def allow_all(request: Request, session_id: str) -> bool:
    """The default ``authorize``: whoever passed the token or loopback check sees every session."""
    return True


Handler = Callable[[Request], Awaitable[Response]]


def close_event_streams(app: Starlette) -> None:
    """End every open event stream of console ``app``; refuse new ones (503). Idempotent.

    Call it when the server starts to stop: the streams never end by themselves,
    and a server such as uvicorn waits for open responses before it stops. Each
    browser reconnects by itself, to the next server on the same address.
    """
    gate: StreamGate = app.state.event_stream_gate
    gate.close()


def create_console_app(
    db: str | os.PathLike[str],
    flows: Sequence[AgentSessionFlow] = (),
    *,
    token: str | None = None,
    authorize: Authorize = allow_all,
    workers: int = 1,
    create: bool = True,
    lease_duration: timedelta = DEFAULT_LEASE_DURATION,
    poll_timeout: timedelta = DEFAULT_AGENT_EVENT_POLL_TIMEOUT,
    worker_setup: ReadWorkerSetup | None = None,
) -> Starlette:
    """The console of the sessions in ``db``, as an ASGI app to serve with any ASGI server.

    ``flows`` are served here by ``workers`` workers (open when the app's lifespan
    starts, closed when it ends), so their sessions run and can be steered and
    started; sessions of every other Flow type in the file are shown read-only.
    ``token``, when given, is required on every request (``ConsoleConfigError``
    when it is empty or not printable ASCII); without one the app answers
    loopback requests only. ``authorize`` decides per session. ``worker_setup``
    says what the workers run a served Flow type's turns with (its model and tools),
    for the session page. Serve it with its lifespan on (uvicorn's default).
    """
    if token is not None:
        check_console_token(token)
    gate = StreamGate()
    read_setup = None if worker_setup is None else GuardedWorkerSetup(worker_setup)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_catalog(
            db, flows, workers=workers, create=create, lease_duration=lease_duration
        ) as catalog:
            app.state.catalog = catalog
            yield

    def guarded(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            refused = refusal(request, token)
            if refused is not None:
                return refused
            session_id = request.path_params.get("session_id")
            if session_id is not None and not await authorize(request, session_id):
                return JSONResponse({"ok": False, "reason": "not allowed"}, status_code=403)
            return await handler(request)

        return endpoint

    async def page(request: Request) -> Response:
        offered = request.query_params.get("token")
        if token is not None and offered is not None and token_matches(token, offered):
            response = RedirectResponse(request.url.path, status_code=303)
            response.set_cookie(
                TOKEN_COOKIE,
                offered,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
            )
            return response
        refused = refusal(request, token)
        if refused is not None:
            return refused
        return page_response()

    static_files = StaticFiles()

    async def static_file(request: Request) -> Response:
        return static_files.response(request.path_params["name"])

    def catalog_of(request: Request) -> SessionCatalog:
        catalog: SessionCatalog = request.app.state.catalog
        return catalog

    async def list_sessions(request: Request) -> Response:
        catalog = catalog_of(request)
        rows = [row for row in await catalog.inbox() if await authorize(request, row.session_id)]
        return JSONResponse(
            {
                "sessions": [row.to_json() for row in rows],
                "flow_types": catalog.writable_flow_types,
                "plan_mode_flow_types": catalog.plan_mode_flow_types,
            }
        )

    async def session_flow(
        request: Request, session_id: str | None = None
    ) -> ConsoleFlow | Response:
        session_id = session_id or request.path_params["session_id"]
        catalog = catalog_of(request)
        try:
            info = await catalog.describe(session_id)
        except FlowNotFoundError:
            return JSONResponse({"ok": False, "reason": "no such session"}, status_code=404)
        entry = catalog.flow(info.flow_type)
        if entry is None:
            return JSONResponse(
                {
                    "ok": False,
                    "reason": f"the console cannot read {info.flow_type} sessions "
                    "(restart it to read Flow types that appeared since it started)",
                },
                status_code=409,
            )
        return entry

    async def snapshot(request: Request) -> Response:
        entry = await session_flow(request)
        if isinstance(entry, Response):
            return entry
        session_id = request.path_params["session_id"]
        catalog = catalog_of(request)
        try:
            value = await read_agent_event_stream_snapshot(
                entry.runtime.flow_client, entry.flow, session_id
            )
            info = await catalog.describe(session_id)
        except DexAgentsError as error:
            reason = str(error)
            with contextlib.suppress(DexAgentsError):
                gone = await catalog.describe(session_id)
                if gone.status == "failed" and gone.failure_reason:
                    # Its state could not be read: why it failed says which value, and that
                    # the session is over, which the read's own error did not.
                    reason = ended(gone)
            return JSONResponse({"ok": False, "reason": reason}, status_code=409)
        row = await catalog.inbox_row(info)
        # Not to_json(), which writes a lone surrogate as U+FFFD for other frameworks'
        # responses: this one escapes it, so the page gets the text as the event frames carry it.
        body: dict[str, Any] = {"snapshot": value.snapshot, "resume_token": value.resume_token}
        body["console"] = {
            "session_id": session_id,
            "flow_type": info.flow_type,
            "writable": row.writable,
            "status": row.status,
            "running": info.status == "running",
            "plan_mode": entry.plan_mode,
            "read_only": read_only_reason(entry, info) if not row.writable else None,
            "plan_approvals": plan_approvals(value.snapshot),
        }
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    async def worker(request: Request) -> Response:
        entry = await session_flow(request)
        if isinstance(entry, Response):
            return entry
        info = await catalog_of(request).describe(request.path_params["session_id"])
        setup = None
        # Only a session this process runs: another Flow type's turns, those of a session that
        # ended, or every turn of a console with no worker (workers=0) run elsewhere, if at all.
        if read_setup is not None and workers and entry.writable and info.status == "running":
            try:
                read, setup = await gate.unless_closed(read_setup(info.flow_type))
            except WorkerSetupUnreadable as error:
                # Not a bare 500: the page says the card could not be read, and why.
                return JSONResponse(
                    {"ok": False, "reason": str(error)},
                    status_code=500,
                    headers={"Cache-Control": "no-store"},
                )
            if not read:
                return PlainTextResponse("the console is stopping", status_code=503)
        body = {"worker": None if setup is None else setup.to_json()}
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    async def messages(request: Request) -> Response:
        entry = await session_flow(request)
        if isinstance(entry, Response):
            return entry
        session_id = request.path_params["session_id"]
        return await messages_page(entry.sessions, session_id, request.query_params)

    streams = EventRoutes(gate, authorize, poll_timeout, session_flow)

    async def control(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in CONTROLS:
            return JSONResponse({"ok": False, "reason": f"no control {name}"}, status_code=404)
        entry = await session_flow(request)
        if isinstance(entry, Response):
            return entry
        if not entry.writable:
            return JSONResponse(
                {
                    "ok": False,
                    "reason": f"read-only: this console does not serve {entry.flow.flow_type}",
                },
                status_code=403,
            )
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        try:
            outcome = await run_control(
                name, entry.sessions, request.path_params["session_id"], body
            )
        except (ControlInputError, ValueError) as error:
            return JSONResponse({"ok": False, "reason": str(error)}, status_code=400)
        except DexAgentsError as error:
            return JSONResponse({"ok": False, "reason": str(error)}, status_code=409)
        return JSONResponse(outcome.to_json())

    async def start_session(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        # Only a missing, null or empty field takes its default: 0 or false is a wrong type.
        for key in ("flow_type", "session_id", "message"):
            if body.get(key) is not None and not isinstance(body[key], str):
                return JSONResponse(
                    {"ok": False, "reason": f"{key} must be a string"}, status_code=400
                )
        catalog = catalog_of(request)
        flow_type = body.get("flow_type") or next(iter(catalog.writable_flow_types), None)
        entry = catalog.flow(flow_type) if flow_type is not None else None
        if entry is None or not entry.writable:
            return JSONResponse(
                {"ok": False, "reason": f"this console does not serve {flow_type}"},
                status_code=400,
            )
        session_id: str = body.get("session_id") or f"console-{secrets.token_hex(4)}"
        if session_id in (".", ".."):
            # A browser drops a "." or ".." path segment, even percent-encoded, so the page's
            # URLs could never reach the session.
            return JSONResponse(
                {"ok": False, "reason": f"the console cannot show a session named {session_id!r}"},
                status_code=400,
            )
        message: str = body.get("message") or ""
        plan_mode = body.get("plan_mode", False)
        if not await authorize(request, session_id):
            return JSONResponse({"ok": False, "reason": "not allowed"}, status_code=403)
        try:
            await entry.sessions.start_session(session_id, message, plan_mode=plan_mode)
        except FlowAlreadyStartedError:
            return JSONResponse(
                {"ok": False, "reason": f"a session with ID {session_id!r} exists already"}
            )
        except (TypeError, ValueError) as error:
            return JSONResponse({"ok": False, "reason": str(error)}, status_code=400)
        return JSONResponse({"ok": True, "reason": None, "session_id": session_id})

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/sessions/{session_id:path}", page, methods=["GET"]),
        Route("/api/sessions", guarded(list_sessions), methods=["GET"]),
        Route("/api/sessions", guarded(start_session), methods=["POST"]),
        Route("/api/sessions/{session_id}/snapshot", guarded(snapshot), methods=["GET"]),
        Route("/api/sessions/{session_id}/messages", guarded(messages), methods=["GET"]),
        Route("/api/sessions/{session_id}/events", guarded(streams.events), methods=["GET"]),
        Route("/api/events", guarded(streams.shared_events), methods=["GET"]),
        Route("/api/sessions/{session_id}/worker", guarded(worker), methods=["GET"]),
        Route("/api/sessions/{session_id}/controls/{name}", guarded(control), methods=["POST"]),
        Route("/static/{name}", static_file, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.event_stream_gate = gate
    return app
