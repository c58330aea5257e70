"""The ``timeout`` request option on a stream LiteLLM sends without it.

LiteLLM 1.105 sends a Gemini model's streaming request (Gemini API and
Vertex AI) on its shared HTTP client, without the call's ``timeout``: a
provider that never answered, or stopped mid-answer, held the call until the
Step's attempt timeout. For such a route the client bounds each read of the
stream by the option itself, as the HTTP client bounds each read of every other
route's: the first read waits for the answer, and each later one for its next
piece.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Mapping
from typing import Any

from dex_agents.adapters.litellm.routing import ModelRoute


class StreamReadTimeoutError(TimeoutError):
    """A read of a stream whose route LiteLLM sends without its timeout took longer than it.

    ``answered`` says whether a piece of the answer had come before it.
    """

    def __init__(self, seconds: float, *, answered: bool) -> None:
        what = "the next piece of the answer" if answered else "no answer"
        verb = " did not come" if answered else " came"
        super().__init__(f"{what}{verb} within the timeout of {seconds:g} seconds")
        self.answered = answered


def unsent_read_timeout(route: ModelRoute, options: Mapping[str, Any]) -> float | None:
    """The ``timeout`` of ``options`` in seconds when LiteLLM would not apply it to ``route``'s stream."""
    timeout = options.get("timeout")
    if not route.gemini:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        return None  # an httpx.Timeout, or none: LiteLLM's own client and its defaults
    return float(timeout) if math.isfinite(timeout) and timeout > 0 else None


class ReadTimedStream:
    """``stream`` with each read bounded by ``seconds``; its other attributes are the stream's.

    The stream readers look at LiteLLM's stream wrapper's own attributes (its
    finish reasons), so they pass through.
    """

    def __init__(self, stream: Any, seconds: float) -> None:
        self._stream = stream
        self._seconds = seconds
        self._iterator: AsyncIterator[Any] | None = None
        self._answered = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __aiter__(self) -> ReadTimedStream:
        return self

    async def __anext__(self) -> Any:
        if self._iterator is None:
            self._iterator = aiter(self._stream)
        scope = asyncio.timeout(self._seconds)
        try:
            async with scope:
                piece = await anext(self._iterator)
        except TimeoutError as error:
            if not scope.expired():
                raise  # the stream's own timeout, not this one
            raise StreamReadTimeoutError(self._seconds, answered=self._answered) from error
        self._answered = True
        return piece
