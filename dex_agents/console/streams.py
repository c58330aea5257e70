"""Ending the console's event streams: when its server stops, and when their session ends.

An event stream never ends by itself, and uvicorn, asked to stop, waits for
every open response before the app's lifespan ends: with one browser tab open,
Ctrl-C would wait forever. ``StreamGate`` ends the streams it lets through once
it is closed; the browser's ``EventSource`` then reconnects, to the next server.

A session that no longer runs (stopped, failed, completed, or removed) writes
no more events, so its stream would only send keep-alives for as long as its
page stays open. ``until_session_ends`` ends it after the first poll that saw
no event once the session has ended, and the events written since that poll,
with a ``session_ended`` event that tells the page not to reconnect.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeVar

from dex_agents.ui_stream import KEEP_ALIVE_FRAME

SESSION_ENDED_EVENT = "session_ended"
"""The SSE event name of a stream's last frame once its session no longer runs."""

T = TypeVar("T")

REMOVED = "removed"
"""The status ``until_session_ends`` gets for a session the engine no longer has."""


def session_ended_frame(status: str) -> str:
    """The last frame of a stream whose session ended with ``status``; it carries no ``id``,
    so it moves no resume token."""
    return f"event: {SESSION_ENDED_EVENT}\ndata: {json.dumps({'status': status})}\n\n"


FramesAfter = Callable[[str], Awaitable[AsyncGenerator[str, None]]]
"""``frames_after(resume_token)``: the session's frames after ``resume_token``, each poll short."""


def _resume_token(frame: str, current: str) -> str:
    # An event's frame starts "id: <token>" (agent_event_frame); a keep-alive carries none.
    if frame.startswith("id: "):
        return frame[4 : frame.index("\n")]
    return current


async def until_session_ends(
    frames: AsyncGenerator[str, None],
    status: Callable[[], Awaitable[str]],
    frames_after: FramesAfter,
    resume_token: str = "",
) -> AsyncGenerator[str, None]:
    """``frames`` (from ``resume_token``) until a poll that saw no event finds ``status()``
    other than ``running``: then the events written since that poll (read by ``frames_after``
    up to its first keep-alive), ``session_ended_frame`` and the end. ``frames`` is closed
    either way.

    Checked only after a keep-alive, so a running session's stream asks once per empty
    long poll. The read after the look sends what a turn wrote between the empty poll and
    the look, when the session ended right after it: none of it was sent before, and the
    page, told the session ended, opens no other stream.
    """
    token = resume_token
    try:
        async for frame in frames:
            yield frame
            token = _resume_token(frame, token)
            if frame == KEEP_ALIVE_FRAME:
                current = await status()
                if current != "running":
                    break
        else:
            return
    finally:
        await frames.aclose()
    if current != REMOVED:  # a session the engine no longer has has no events to read
        rest = await frames_after(token)
        try:
            async for frame in rest:
                if frame == KEEP_ALIVE_FRAME:
                    break
                yield frame
        finally:
            await rest.aclose()
    yield session_ended_frame(current)


class StreamGate:
    """Lets event streams run until ``close()``; streams passed after that end at once."""

    def __init__(self) -> None:
        self._closed = asyncio.Event()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed.is_set()

    def close(self) -> None:
        """End every stream passed through this gate, at its current wait; idempotent."""
        self._closed.set()

    async def unless_closed(self, work: Awaitable[T]) -> tuple[bool, T | None]:
        """``(True, result)`` of ``work``, or ``(False, None)`` once the gate closes first,
        with ``work`` cancelled: a request that waits on something slow (a first MCP
        listing) would hold the server's stop as a stream does."""
        task = asyncio.ensure_future(work)
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({task, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        if task.cancelled():
            return False, None
        return True, task.result()

    async def passing(self, frames: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
        """``frames`` until the gate closes; ``frames`` is closed either way."""
        closed = asyncio.ensure_future(self._closed.wait())
        following: asyncio.Future[str] | None = None
        try:
            while not self._closed.is_set():
                following = asyncio.ensure_future(anext(frames))
                await asyncio.wait({following, closed}, return_when=asyncio.FIRST_COMPLETED)
                if not following.done():
                    return
                try:
                    frame = following.result()
                except StopAsyncIteration:
                    return
                yield frame
        finally:
            closed.cancel()
            if following is not None and not following.done():
                # Cancelling the read ends the generator at its long poll; asyncio.wait
                # waits for that without raising the cancellation here.
                following.cancel()
                await asyncio.wait({following})
            await frames.aclose()
