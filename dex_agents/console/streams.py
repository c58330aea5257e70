"""Ending the console's event streams when its server stops.

An event stream never ends by itself, and uvicorn, asked to stop, waits for
every open response before the app's lifespan ends: with one browser tab open,
Ctrl-C would wait forever. ``StreamGate`` ends the streams it lets through once
it is closed; the browser's ``EventSource`` then reconnects, to the next server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator


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
