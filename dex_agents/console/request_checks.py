"""What the console checks of a request before a route acts on it.

``refusal`` applies the rules of ``dex_agents.console.security`` to a request:
the token or loopback rule for every request, and the cross-site rule for
every state-changing one. ``json_body`` reads a ``POST``'s JSON object,
refusing a body past ``MAX_BODY_BYTES`` as it arrives.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from dex_agents.console.responses import JSONResponse
from dex_agents.console.security import (
    TOKEN_COOKIE,
    bearer_token,
    cross_site_refusal,
    host_header_name,
    is_loopback_host,
    token_matches,
)

MAX_BODY_BYTES = 256 * 1024
"""The largest request body the console reads."""


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def refusal(request: Request, token: str | None) -> Response | None:
    """The response refusing ``request`` before any route runs, or ``None`` to let it in."""
    if token is not None:
        offered = bearer_token(request.headers.get("authorization")) or request.cookies.get(
            TOKEN_COOKIE
        )
        if not token_matches(token, offered):
            return PlainTextResponse(
                "this console needs its token: open it at /?token=<token>", status_code=401
            )
    else:
        peer = request.client.host if request.client else ""
        host = host_header_name(request.headers.get("host", ""))
        if not (is_loopback_host(peer) and is_loopback_host(host)):
            return PlainTextResponse(
                "without a token this console answers only on loopback (localhost)",
                status_code=403,
            )
    if request.method not in ("GET", "HEAD"):
        reason = cross_site_refusal(request.headers, _own_origin(request))
        if reason is not None:
            return JSONResponse({"ok": False, "reason": reason}, status_code=403)
    return None


async def json_body(request: Request) -> dict[str, Any] | Response:
    """The request's body as a JSON object (``{}`` when empty), or the response refusing it:
    too large (413), not JSON or not an object (400)."""
    too_large = JSONResponse({"ok": False, "reason": "request too large"}, status_code=413)
    # Refused by its declared length, or as it arrives: never read whole into memory.
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return too_large
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return JSONResponse({"ok": False, "reason": "the body is not JSON"}, status_code=400)
    if not isinstance(body, dict):
        return JSONResponse(
            {"ok": False, "reason": "the body is not a JSON object"}, status_code=400
        )
    return body
