"""Whether Gemini finished a streamed answer, read off the stream's HTTP body.

Gemini names why an answer ended (``finishReason``) in its last chunk; a
stream that ends without one was cut. LiteLLM (1.105) maps a chunk without one
to ``"stop"`` and keeps neither the raw chunk nor the provider's value on its
chunks or stream wrapper, so a Gemini stream that ended cleanly mid-answer read
as a whole answer. Its parser is no stable place to look; Gemini's wire format
is. For a Gemini model's Chat Completions call the client hands LiteLLM an HTTP
client of its own (``client=``, which LiteLLM uses for the stream's request,
built like LiteLLM's shared one), whose response hook watches each ``data:``
line of the body as LiteLLM reads it. A call whose body was never watched (a
caller's own ``client``, or a LiteLLM that ignores it) is read as before.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler


class GeminiFinishWatch:
    """What the body of one Gemini stream said: whether it came, and whether Gemini ended it."""

    def __init__(self) -> None:
        self.watched = False
        """A response of the provider came through the watch."""
        self.finished = False
        """A chunk named a ``finishReason``, or Gemini blocked the prompt (``blockReason``)."""

    def http_client(self) -> AsyncHTTPHandler:
        """A LiteLLM HTTP client, built as LiteLLM builds its own, whose responses this watches.

        The caller closes it (``close``) once the call is over.
        """
        return AsyncHTTPHandler(event_hooks={"response": [self._watch]})

    async def _watch(self, response: httpx.Response) -> None:
        body = response.stream
        if isinstance(body, httpx.AsyncByteStream):  # always, on an async client
            self.watched = True
            response.stream = _WatchedBody(body, self)

    def read_line(self, line: bytes) -> None:
        """Read one line of the Server-Sent Events body."""
        if self.finished or not line.startswith(b"data:"):
            return
        try:
            chunk: Any = json.loads(line[5:])
        except ValueError:
            return
        if not isinstance(chunk, dict):
            return
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.finished = True  # no answer at all: LiteLLM reads it as filtered
        for candidate in chunk.get("candidates") or ():
            if isinstance(candidate, dict) and candidate.get("finishReason"):
                self.finished = True

    @property
    def cut(self) -> bool:
        """Whether a watched stream ended without Gemini ending the answer."""
        return self.watched and not self.finished


class _WatchedBody(httpx.AsyncByteStream):
    """A response body passed on unchanged, each complete line shown to the watch."""

    def __init__(self, body: httpx.AsyncByteStream, watch: GeminiFinishWatch) -> None:
        self._body = body
        self._watch = watch
        self._partial = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._body:
            *lines, self._partial = (self._partial + piece).split(b"\n")
            for line in lines:
                self._watch.read_line(line.rstrip(b"\r"))
            yield piece
        if self._partial:
            self._watch.read_line(self._partial.rstrip(b"\r"))
            self._partial = b""

    async def aclose(self) -> None:
        await self._body.aclose()
