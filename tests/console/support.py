"""The console under uvicorn on 127.0.0.1, and a polling helper for its JSON API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
from starlette.applications import Starlette

from tests.support.uvicorn_servers import serve_with_uvicorn

T = TypeVar("T")

CONTROL_HEADERS = {"X-Dex-Agents-Console": "1"}


def serve_console(app: Starlette) -> contextlib.AbstractAsyncContextManager[str]:
    """Serve ``app`` (lifespan on, so its runtime opens) as a task of this loop; yield its URL."""
    return serve_with_uvicorn(app, lifespan=True)


async def eventually(
    read: Callable[[], Awaitable[T]], done: Callable[[T], bool], within: float = 15.0
) -> T:
    """Read until ``done`` holds; fail with the last value after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await read()
        if done(value):
            return value
        if loop.time() > deadline:
            raise AssertionError(f"not reached in {within} s; last value: {value!r}")
        await asyncio.sleep(0.05)


async def snapshot(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    """The console's snapshot JSON of ``session_id``."""
    response = await client.get(f"/api/sessions/{session_id}/snapshot")
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def texts(body: dict[str, Any]) -> str:
    """Every message text and tool output of a snapshot, joined."""
    parts: list[str] = []
    for message in body["snapshot"]["messages"]:
        parts.extend(str(message.get(key) or "") for key in ("text", "tool_output"))
    return "\n".join(parts)
