"""Several sessions' event streams on one connection: ``GET /api/events?streams=...``.

A browser opens at most six HTTP/1.1 connections to one host, and each shown
session page's own stream held one for as long as it was open: with seven
pages shown side by side, one never loaded and every read and control of theirs
waited. The pages of one browser share a worker (``static/stream_worker.js``)
that holds one connection for all of them, with a stream per page in it.

``streams`` is JSON ``{key: {"session_id": ..., "resume_token": ...}}``, one
entry per page (its key is the page's). Each frame of the answer is an SSE
``data`` line of JSON naming its stream: ``{"stream": key, "kind": "event",
"id": token, "data": event JSON}`` for an event, ``"kind": "session_ended"``
(``data``: the ``session_ended`` frame's) when its session no longer runs, and
``"kind": "error"`` with the ``status`` its own route would have answered (400
for a refused token, 403, 404, 409, 503) when it could not be opened or it
ended otherwise. Keep-alives pass as they are; the frames ready at once go in
one write. The answer ends when every stream in it has. The worker opens it
again from each stream's last event when a page comes or goes: no event is
lost or sent twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import attrs

from dex_agents.console.streams import SESSION_ENDED_EVENT
from dex_agents.ui_stream import KEEP_ALIVE_FRAME

_log = logging.getLogger(__name__)

MAX_SHARED_STREAMS = 100
"""The most streams one connection carries; the worker puts those past it on another (its
``MAX_STREAMS``)."""


@attrs.frozen
class StreamRequest:
    """One page's stream: its session and the token it resumes from."""

    session_id: str
    resume_token: str


def requested_streams(raw: str) -> dict[str, StreamRequest] | None:
    """The streams ``raw`` names, or ``None`` when it is not the JSON described above."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # nested past the parser's depth: no such JSON either
        return None
    if not isinstance(value, dict) or not 0 < len(value) <= MAX_SHARED_STREAMS:
        return None
    streams: dict[str, StreamRequest] = {}
    for key, entry in value.items():
        if not isinstance(entry, dict):
            return None
        session_id, token = entry.get("session_id"), entry.get("resume_token", "")
        if not isinstance(session_id, str) or not session_id or not isinstance(token, str):
            return None
        streams[key] = StreamRequest(session_id, token)
    return streams


def _shared_frame(key: str, kind: str, **fields: Any) -> str:
    return f"data: {json.dumps({'stream': key, 'kind': kind, **fields})}\n\n"


def _fields(frame: str) -> dict[str, str]:
    # The frames of one session's stream: "id: <token>\ndata: <json>" for an event and
    # "event: session_ended\ndata: <json>" at its end, each field on one line.
    fields: dict[str, str] = {}
    for line in frame.split("\n"):
        name, separator, value = line.partition(": ")
        if separator and name in ("id", "event", "data"):
            fields[name] = value
    return fields


def _stream_frame(key: str, frame: str, ended_well: set[str]) -> list[str]:
    # The shared frame of one session's frame (none for one that is neither), noting in
    # ended_well a stream whose session ended.
    fields = _fields(frame)
    if fields.get("event") == SESSION_ENDED_EVENT:
        ended_well.add(key)
        return [_shared_frame(key, SESSION_ENDED_EVENT, data=fields.get("data", "{}"))]
    if "data" in fields:
        return [_shared_frame(key, "event", id=fields.get("id", ""), data=fields["data"])]
    return []


_END = None

BUFFERED_FRAMES = 32
"""The most frames read ahead of the connection: a browser that stops reading stops the reads,
as it does those of a session's own stream, where every event since was kept in memory."""


async def shared_frames(
    opened: Mapping[str, AsyncGenerator[str, None] | int],
) -> AsyncGenerator[str, None]:
    """The frames of every stream of ``opened`` (key to its session's frames, or to the status
    its route answered), as described above, until each has ended; each is closed either way.
    Each chunk holds every frame ready when it is made, one or more."""
    queue: asyncio.Queue[tuple[str, str | None]] = asyncio.Queue(BUFFERED_FRAMES)

    async def pump(key: str, frames: AsyncGenerator[str, None]) -> None:
        try:
            async for frame in frames:
                await queue.put((key, frame))
        except Exception:  # one session's read that failed must not end the others'
            # Its page is told (an error frame), and the cause logged, as its own route's
            # failure is by the server.
            _log.warning("the event stream of %s failed", key, exc_info=True)
        finally:
            await frames.aclose()
        # Not when cancelled: the connection is gone, and a full queue would hold this forever.
        await queue.put((key, _END))

    pumps = [
        asyncio.ensure_future(pump(key, frames))
        for key, frames in opened.items()
        if not isinstance(frames, int)
    ]
    try:
        # Every frame ready is sent in one write: written one by one in one go, the frames of
        # many streams met a connection the browser had reset with as many failed writes, each
        # past the fourth logging asyncio's "socket.send() raised exception", before the
        # server's loop, at the next wait, saw the connection gone.
        ready = [
            _shared_frame(key, "error", status=status)
            for key, status in opened.items()
            if isinstance(status, int)
        ]
        ended_well: set[str] = set()
        running = len(pumps)
        while running:
            if ready:
                yield "".join(ready)
                ready = []
            taken = [await queue.get()]
            while not queue.empty():  # at most the queue's size: the pumps wait for this one
                taken.append(queue.get_nowait())
            for key, frame in taken:
                if frame is _END:
                    running -= 1
                    if key not in ended_well:  # the console stopping, a read that failed
                        ready.append(_shared_frame(key, "error", status=503))
                elif frame == KEEP_ALIVE_FRAME:
                    ready.append(frame)
                else:
                    ready.extend(_stream_frame(key, frame, ended_well))
        if ready:
            yield "".join(ready)
    finally:
        for task in pumps:
            task.cancel()
        if pumps:
            await asyncio.wait(pumps)
