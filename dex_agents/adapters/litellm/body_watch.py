"""What a model call's HTTP body said that LiteLLM does not keep, read as LiteLLM reads it.

LiteLLM (1.105) reads some answers without keeping what the provider said: a
JSON error body sent with HTTP 200 in place of a stream, the Responses API's
error event in its documented flat shape (``answered_errors``), Gemini's
``finishReason`` (``gemini_finish``), Anthropic's and Bedrock's stop reasons
(``anthropic_stop``, ``bedrock_stop``). A ``BodyWatch`` sees each line of one
call's response body as it passes to LiteLLM, and may mend a line before
LiteLLM reads it; a binary body (Bedrock's event stream) it sees in pieces. It
sees the body either through an HTTP client of its own that the call hands
LiteLLM (``client=``, ``watched_http_client``), whose response hook passes each
body to the watch of the call that sent the request (``watching``), or, for a
stream whose HTTP response LiteLLM returns unread (the OpenAI SDK's, the
Responses API's, that of LiteLLM's own HTTP handler for OpenAI-compatible
providers such as DeepSeek, xAI, Mistral), by wrapping that response's body
(``watch_response``). The body is read before the HTTP client decodes it, so
the watched client asks for it uncompressed, so that a watch may mend its
lines; a body sent gzip-, deflate- or zstd-compressed anyway (the SDKs ask for
one) is watched through a decompressed copy, passed on as it came, unmended,
and one of another encoding is not watched. The calls of one event loop share
the watched client, so their connections are reused as on LiteLLM's own shared
client; LiteLLM's client cache keeps it, one per event loop, and closes it as
it closes its own. A call whose body was never watched (a caller's own
``client``) is read as before.
"""

from __future__ import annotations

import importlib
import json
import re
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any, Final

import httpx
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler, get_async_httpx_client

from dex_agents.adapters.litellm.answered_errors import AnsweredError, answered_error

_CLIENT_NAME: Final = "dex_agents_body_watch"
"""The name LiteLLM's client cache keeps the watched client under, with its event loop."""

FAILED_FINISH_REASONS: Final = frozenset({"error", "abort"})
"""Chat Completions finish reasons that say the answer failed rather than ended."""

_TELLING: Final = re.compile(rb'"error|"refusal"|"finish_reason"\s*:\s*"abort"')
"""What a line holds that the watch reads: an error, a refusal, a failed finish."""

_BODY_LIMIT: Final = 65536
"""The most of a body that is not a stream the watch keeps: an error body is short."""


class BodyWatch:
    """What the body of one call said: whether it came, and the error the provider answered."""

    reads_every_chunk = False
    """Whether ``read_chunk`` reads each chunk; else only a line that may hold an error is parsed."""

    reads_body_as_it_comes = False
    """Whether ``read_body`` reads a body that is not a stream at each piece, not only at its end.

    For a body LiteLLM fails to read before it ends (Bedrock's JSON read as its
    binary event stream), which never reaches its end.
    """

    binary = False
    """Whether the body is read in binary pieces (``read_bytes``, Bedrock's event
    stream), not as lines; ``sees`` sets it."""

    def __init__(self) -> None:
        self.watched = False
        """A response of the provider came through the watch."""
        self.error: AnsweredError | None = None
        """The first error the body held: a JSON error body, or an error event of a stream."""
        self.refusal: list[str] = []
        """The pieces of a Chat Completions refusal (``delta.refusal``), which LiteLLM drops."""
        self.failed_finish: str | None = None
        """The finish reason a Chat Completions chunk ended the answer with, when it says it failed.

        ``"error"`` (OpenRouter's) or ``"abort"`` (vLLM's, SGLang's); LiteLLM
        (1.105) reads either as ``stop`` (``"error"`` only on the routes it reads
        with its own HTTP handler), so half an answer read as a whole one.
        """
        self.finish_reason: str | None = None
        """The finish reason the body names where LiteLLM (1.105) reports ``"stop"``
        (``"length"`` for an answer the context window stopped)."""
        self.failed_reason: str | None = None
        """Why the model failed to make its answer (Gemini's ``MALFORMED_FUNCTION_CALL``),
        which LiteLLM reads as ``"stop"``; another sample of the request may pass."""

    def read_line(self, line: bytes) -> bytes:
        """Read one line of a Server-Sent Events body (without its ``\\n``); the line to pass on."""
        if not line.startswith(b"data:"):
            return line
        if not self.reads_every_chunk and _TELLING.search(line) is None:
            return line  # LiteLLM parses each line too: a second parse only where it may tell
        try:
            chunk: Any = json.loads(line[5:])
        except ValueError:
            return line
        if not isinstance(chunk, dict):
            return line
        if self.error is None:
            self.error = answered_error(chunk, in_stream=True)
        answer = chat_answer(chunk)
        if answer is not None:
            delta = answer.get("delta")
            refusal = delta.get("refusal") if isinstance(delta, dict) else None
            if isinstance(refusal, str) and refusal:
                self.refusal.append(refusal)
            finish = answer.get("finish_reason")
            if finish in FAILED_FINISH_REASONS:
                self.failed_finish = finish
        if not self.read_chunk(chunk):
            return line
        ending = b"\r" if line.endswith(b"\r") else b""
        return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + ending

    def read_chunk(self, chunk: dict[str, Any]) -> bool:
        """Read one JSON chunk of a stream, mending it in place; whether it was mended."""
        return False

    def sees(self, response: httpx.Response) -> bool:
        """Whether the watch reads the body of ``response``; it may keep what its headers say."""
        return True

    def read_bytes(self, piece: bytes) -> None:
        """Read one piece of a ``binary`` body as it comes; the piece passes on unchanged."""

    def read_body(self, body: bytes) -> None:
        """Read the whole of a body that is not a stream (JSON, as an error answers)."""
        try:
            data = json.loads(body)
        except ValueError:
            return
        if self.error is None:
            self.error = answered_error(data, in_stream=False)


def chat_answer(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """The choice of a Chat Completions chunk that is the answer (index 0, or none), or ``None``."""
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if isinstance(choice, dict) and (choice.get("index") or 0) == 0:
            return choice
    return None


_CALL_WATCH: ContextVar[BodyWatch | None] = ContextVar("dex_agents_body_watch", default=None)
"""The watch of the call running in this context: the shared client's hook finds it here."""


def watched_http_client() -> AsyncHTTPHandler:
    """The LiteLLM HTTP client of this event loop whose responses the calls' watches see.

    LiteLLM's client cache builds it as LiteLLM builds its own shared client,
    keeps it for the running event loop, and closes it as it closes its own:
    the caller must not close it.
    """
    hooks = {"request": [_ask_for_a_plain_body], "response": [_show_to_watch]}
    return get_async_httpx_client(llm_provider=_CLIENT_NAME, params={"event_hooks": hooks})


@contextmanager
def watching(watch: BodyWatch | None) -> Iterator[None]:
    """Show ``watch`` the body of each response the watched client gets in this context.

    ``None`` watches nothing: a call that is not watched sees no outer call's watch.
    """
    token = _CALL_WATCH.set(watch)
    try:
        yield
    finally:
        _CALL_WATCH.reset(token)


def watch_response(response: object, watch: BodyWatch) -> bool:
    """Show ``watch`` the body of ``response``, an HTTP response not yet read; whether it could.

    The caller holds the response LiteLLM returned; ``False`` for anything else.
    """
    if not isinstance(response, httpx.Response) or response.is_stream_consumed:
        return False
    encodings = [
        name.strip().lower()
        for name in response.headers.get("content-encoding", "").split(",")
        if name.strip().lower() not in ("", "identity")
    ]
    if len(encodings) > 1 or (encodings and encodings[0] not in _INFLATED_ENCODINGS):
        # The body is read before the HTTP client decodes it: one the watch cannot
        # decompress is not read at all, rather than read as a body that said nothing.
        return False
    body = response.stream
    if not isinstance(body, httpx.AsyncByteStream) or isinstance(body, _WatchedBody):
        return False
    if not watch.sees(response):
        return False
    watch.watched = True
    inflater = _Inflater(encodings[0]) if encodings else None
    response.stream = _WatchedBody(body, watch, _is_event_stream(response), inflater)
    return True


def _is_event_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


async def _ask_for_a_plain_body(request: httpx.Request) -> None:
    # A watched body is read as it comes, before the HTTP client decodes it, so
    # a watched call asks for it uncompressed (a gzip body read as saying nothing).
    if _CALL_WATCH.get() is not None:
        request.headers["accept-encoding"] = "identity"


async def _show_to_watch(response: httpx.Response) -> None:
    # httpx runs response hooks in the task that sent the request, whose
    # context holds that call's watch (concurrent calls run in their own tasks).
    watch = _CALL_WATCH.get()
    if watch is not None:
        watch_response(response, watch)


def _zstd_decoder() -> ModuleType | None:
    # httpx's optional zstd decoder (installed beside some LiteLLM installs, not by this
    # package): without it httpx asks for no zstd body, so there is none to watch.
    try:
        return importlib.import_module("zstandard")
    except ImportError:
        return None


zstandard: Final = _zstd_decoder()

_INFLATED_ENCODINGS: Final = frozenset(
    {"gzip", "deflate"} if zstandard is None else {"gzip", "deflate", "zstd"}
)
"""The content encodings whose body the watch reads through a decompressed copy.

Those httpx decodes and asks for: zstd where its decoder is installed; never
``br``, which httpx here neither asks for nor decodes without ``brotli``.
"""

_UNDECODABLE: Final[tuple[type[Exception], ...]] = (
    (zlib.error,) if zstandard is None else (zlib.error, zstandard.ZstdError)
)
"""What decompressing a body that is not so compressed raises."""


class _Inflater:
    """A body's gzip, deflate or zstd compression undone, piece by piece, as httpx undoes it."""

    def __init__(self, encoding: str) -> None:
        self._zstd = (
            None
            if encoding != "zstd" or zstandard is None
            else zstandard.ZstdDecompressor().decompressobj()
        )
        self._gzip = encoding == "gzip"
        # Deflate is zlib-wrapped by the standard and sent raw by some servers:
        # the first piece tells, as httpx's own decoder reads it.
        self._first = not self._gzip
        self._decompressor = zlib.decompressobj(
            zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS
        )

    def inflate(self, piece: bytes) -> bytes:
        """The plain bytes of ``piece``; raises one of ``_UNDECODABLE`` for a body not so compressed."""
        if self._zstd is not None and zstandard is not None:
            plain: bytes = self._zstd.decompress(piece)
            while self._zstd.eof and self._zstd.unused_data:
                # A body of several frames, which httpx decodes one after the other.
                rest = self._zstd.unused_data
                self._zstd = zstandard.ZstdDecompressor().decompressobj()
                plain += self._zstd.decompress(rest)
            return plain
        first, self._first = self._first, False
        try:
            return self._decompressor.decompress(piece)
        except zlib.error:
            if not first:
                raise
            self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._decompressor.decompress(piece)

    def flush(self) -> bytes:
        """The plain bytes the decompressor still holds at the body's end."""
        if self._zstd is not None:
            rest: bytes = self._zstd.flush()
            return rest
        return self._decompressor.flush()


class _WatchedBody(httpx.AsyncByteStream):
    """A response body passed on line by line, each line as the watch passes it on.

    A line is passed on once it is complete: LiteLLM reads the body by lines,
    so holding a line's first part until its end delays nothing it reads. A
    body that is not an event stream is also kept, up to ``_BODY_LIMIT``, for
    the watch to read whole once it ends. A compressed body (``inflater``) is
    passed on as it came, the watch reading its decompressed copy; a copy that
    does not decompress stops the watch, which then judges nothing.
    """

    def __init__(
        self,
        body: httpx.AsyncByteStream,
        watch: BodyWatch,
        event_stream: bool,
        inflater: _Inflater | None = None,
    ) -> None:
        self._body = body
        self._watch = watch
        self._compressed = inflater is not None
        self._inflater = inflater
        self._binary = watch.binary
        self._kept: bytearray | None = None if event_stream or self._binary else bytearray()
        self._partial = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._body:
            if not self._compressed:
                passed = self._read(piece)
                if passed:
                    yield passed
                continue
            if self._inflater is not None:
                self._read_copy(self._inflater.inflate, piece)
            yield piece
        if self._inflater is not None:
            self._read_copy(self._inflater.flush, None)
        if self._partial:
            passed = self._watch.read_line(self._partial)
            self._partial = b""
            if not self._compressed:
                yield passed
        if self._kept is not None and len(self._kept) <= _BODY_LIMIT:
            self._watch.read_body(bytes(self._kept))

    def _read(self, piece: bytes) -> bytes:
        """Show the watch the complete lines ``piece`` ends; the bytes to pass on."""
        if self._binary:
            self._watch.read_bytes(piece)
            return piece
        if self._kept is not None and len(self._kept) <= _BODY_LIMIT:
            self._kept += piece
            if self._watch.reads_body_as_it_comes:
                self._watch.read_body(bytes(self._kept))
        *lines, self._partial = (self._partial + piece).split(b"\n")
        return b"".join(self._watch.read_line(line) + b"\n" for line in lines)

    def _read_copy(self, inflate: Callable[..., bytes], piece: bytes | None) -> None:
        """Show the watch the decompressed copy of ``piece`` (the rest, for ``None``)."""
        try:
            plain = inflate() if piece is None else inflate(piece)
        except _UNDECODABLE:
            # The HTTP client fails on it too: a body the watch could not read says nothing.
            self._inflater = self._kept = None
            self._partial = b""
            self._watch.watched = False
            return
        self._read(plain)

    async def aclose(self) -> None:
        await self._body.aclose()
