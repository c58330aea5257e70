"""Reading Server-Sent Event frames off a real HTTP response, as a browser's ``EventSource`` splits them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

READ_DEADLINE_SECONDS = 10.0


@dataclass(frozen=True)
class Frame:
    """One SSE frame: its raw text, its ``id`` and ``data`` (``None`` when absent), and a comment."""

    raw: str
    id: str | None
    data: str | None
    comment: str | None

    @property
    def event(self) -> dict[str, Any]:
        """The ``AgentEvent`` wire JSON of an event frame, its ``payload`` decoded once more."""
        assert self.data is not None
        event: dict[str, Any] = json.loads(self.data)
        assert isinstance(event["payload"], str)
        event["payload"] = json.loads(event["payload"])
        return event

    @property
    def type(self) -> str | None:
        """The event type, or ``None`` for a comment."""
        return None if self.data is None else str(self.event["type"])


def parse_frame(raw: str) -> Frame:
    """Split one frame (without its blank line) into its fields."""
    fields: dict[str, str] = {}
    comment = None
    for line in raw.split("\n"):
        if line.startswith(":"):
            comment = line[1:].strip()
            continue
        name, _, value = line.partition(":")
        fields[name] = value.removeprefix(" ")
    return Frame(raw=raw + "\n\n", id=fields.get("id"), data=fields.get("data"), comment=comment)


class FrameReader:
    """Frames of one streaming response, read until a condition holds, within a deadline."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.aiter_text()
        self._buffer = ""
        self.frames: list[Frame] = []

    async def next_frame(self) -> Frame:
        """The next frame."""
        async with asyncio.timeout(READ_DEADLINE_SECONDS):
            while "\n\n" not in self._buffer:
                self._buffer += await anext(self._chunks)
        raw, self._buffer = self._buffer.split("\n\n", 1)
        frame = parse_frame(raw)
        self.frames.append(frame)
        return frame

    async def until(self, done: Callable[[Frame], bool]) -> list[Frame]:
        """Frames up to and including the first one for which ``done`` holds."""
        read: list[Frame] = []
        while True:
            frame = await self.next_frame()
            read.append(frame)
            if done(frame):
                return read


def is_type(event_type: str) -> Callable[[Frame], bool]:
    """A condition: the frame is an event of ``event_type``."""
    return lambda frame: frame.data is not None and frame.type == event_type


def events_only(frames: list[Frame]) -> list[Frame]:
    """The event frames, without keep-alive comments."""
    return [frame for frame in frames if frame.data is not None]
