"""Whether Gemini finished a streamed answer, read off the stream's HTTP body.

Gemini names why an answer ended (``finishReason``) in its last chunk; a
stream that ends without one was cut. LiteLLM (1.105) maps a chunk without one
to ``"stop"`` and keeps neither the raw chunk nor the provider's value on its
chunks or stream wrapper, so a Gemini stream that ended cleanly mid-answer read
as a whole answer. Its parser is no stable place to look; Gemini's wire format
is. For a Gemini model's Chat Completions call the client hands LiteLLM an HTTP
client (``client=``, which LiteLLM uses for the stream's request) whose
response hook shows each ``data:`` line of the body, as LiteLLM reads it, to
the watch of the call that sent the request (``watching``). The Gemini calls
of one event loop share that client, so their connections are reused as on
LiteLLM's own shared client; LiteLLM's client cache keeps it, one per event
loop, and closes it as it closes its own. A call whose body was never watched
(a caller's own ``client``, or a LiteLLM that ignores it) is read as before.

The watch also mends what LiteLLM (1.105) cannot read: a ``functionCall``
without ``args``, which Gemini's API makes optional (a call of a function that
takes no parameters) and LiteLLM's parser needs, gets ``"args": {}``, what the
missing field means, before LiteLLM reads the line.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

import httpx
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler, get_async_httpx_client

_CLIENT_NAME: Final = "dex_agents_gemini_finish_watch"
"""The name LiteLLM's client cache keeps the watched client under, with its event loop."""


class GeminiFinishWatch:
    """What the body of one Gemini stream said: whether it came, and whether Gemini ended it."""

    def __init__(self) -> None:
        self.watched = False
        """A response of the provider came through the watch."""
        self.finished = False
        """A chunk named a ``finishReason``, or Gemini blocked the prompt (``blockReason``)."""

    def read_line(self, line: bytes) -> bytes:
        """Read one line of the Server-Sent Events body (without its ``\\n``); the line to pass on.

        The line as it came, unless it holds a function call LiteLLM cannot read
        (``mend_function_calls``): then the line with the call mended.
        """
        if not line.startswith(b"data:"):
            return line
        try:
            chunk: Any = json.loads(line[5:])
        except ValueError:
            return line
        if not isinstance(chunk, dict):
            return line
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.finished = True  # no answer at all: LiteLLM reads it as filtered
        for candidate in chunk.get("candidates") or ():
            if isinstance(candidate, dict) and candidate.get("finishReason"):
                self.finished = True
        if not mend_function_calls(chunk):
            return line
        ending = b"\r" if line.endswith(b"\r") else b""
        return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + ending

    @property
    def cut(self) -> bool:
        """Whether a watched stream ended without Gemini ending the answer."""
        return self.watched and not self.finished


def mend_function_calls(chunk: dict[str, Any]) -> bool:
    """Give each ``functionCall`` of ``chunk`` without ``args`` an empty ``args``; whether one had none.

    Gemini's API makes ``args`` optional; LiteLLM (1.105) raises ``KeyError``
    for a call without it, on every retry alike.
    """
    mended = False
    for candidate in chunk.get("candidates") or ():
        content = candidate.get("content") if isinstance(candidate, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            call = part.get("functionCall") if isinstance(part, dict) else None
            if isinstance(call, dict) and "args" not in call:
                call["args"] = {}
                mended = True
    return mended


_CALL_WATCH: ContextVar[GeminiFinishWatch | None] = ContextVar(
    "dex_agents_gemini_finish_watch", default=None
)
"""The watch of the call running in this context: the shared client's hook finds it here."""


def watched_http_client() -> AsyncHTTPHandler:
    """The LiteLLM HTTP client of this event loop whose responses the calls' watches see.

    LiteLLM's client cache builds it as LiteLLM builds its own shared client,
    keeps it for the running event loop, and closes it as it closes its own:
    the caller must not close it.
    """
    return get_async_httpx_client(
        llm_provider=_CLIENT_NAME, params={"event_hooks": {"response": [_show_to_watch]}}
    )


@contextmanager
def watching(watch: GeminiFinishWatch | None) -> Iterator[None]:
    """Show ``watch`` the body of each response the watched client gets in this context.

    ``None`` watches nothing: a call that is not watched sees no outer call's watch.
    """
    token = _CALL_WATCH.set(watch)
    try:
        yield
    finally:
        _CALL_WATCH.reset(token)


async def _show_to_watch(response: httpx.Response) -> None:
    # httpx runs response hooks in the task that sent the request, whose
    # context holds that call's watch (concurrent calls run in their own tasks).
    watch = _CALL_WATCH.get()
    body = response.stream
    if watch is not None and isinstance(body, httpx.AsyncByteStream):
        watch.watched = True
        response.stream = _WatchedBody(body, watch)


class _WatchedBody(httpx.AsyncByteStream):
    """A response body passed on line by line, each line as the watch passes it on.

    A line is passed on once it is complete: LiteLLM reads the body by lines,
    so holding a line's first part until its end delays nothing it reads.
    """

    def __init__(self, body: httpx.AsyncByteStream, watch: GeminiFinishWatch) -> None:
        self._body = body
        self._watch = watch
        self._partial = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._body:
            *lines, self._partial = (self._partial + piece).split(b"\n")
            if lines:
                yield b"".join(self._watch.read_line(line) + b"\n" for line in lines)
        if self._partial:
            yield self._watch.read_line(self._partial)
            self._partial = b""

    async def aclose(self) -> None:
        await self._body.aclose()
