"""A model provider on loopback: it records each request and answers from a script.

``ProviderServer`` is an HTTP/1.1 server on ``127.0.0.1`` (asyncio streams, one
request per connection unless ``keep_alive``, and ``connections`` counts the
connections it took) that LiteLLM reaches through ``api_base``. Each request
takes the next scripted ``Reply``: a JSON answer with a status, or Server-Sent
Events sent with chunked transfer encoding (or binary ``frames``, as Bedrock's
event stream), optionally cut after some events by
closing the connection without the final chunk, as a dropped stream looks, or
paced: each event sent only once the test lets it (``before_event``). A
request with no reply left is answered 500 and counted in ``unscripted``, and
``assert_script_used`` fails when a reply was not used, so a test never passes
on a request it did not expect. ``refuse`` checks each request as the real
provider would (see ``provider_rules``): a request it answers is refused with
that reply, before the script is read.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib
import json
import zlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server read it: ``body`` is the decoded JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Reply:
    """A scripted answer: ``events`` (``(event name or None, data)``) make it a stream."""

    status: int = 200
    body: Any = None
    events: Sequence[tuple[str | None, Any]] | None = None
    cut_after: int | None = None
    before_event: Callable[[int], Awaitable[None]] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    """Further response headers of a JSON answer, such as ``retry-after``."""
    frames: Sequence[bytes] | None = None
    """A stream of binary frames sent as they are, in place of ``events``."""
    content_type: str = "text/event-stream"
    """The content type of a stream."""
    compression: str | None = None
    """``"gzip"`` or ``"deflate"``: send the body so compressed when the request accepts
    it, as Google's front ends do, and as a gateway may an error body."""


def json_reply(status: int, body: Any, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    """A JSON answer with ``status`` and any further ``headers``."""
    return Reply(status=status, body=body, headers=headers)


def frames_reply(
    frames: Sequence[bytes], content_type: str, *, cut_after: int | None = None
) -> Reply:
    """A stream of binary ``frames`` of ``content_type``; ``cut_after`` as in ``sse_reply``."""
    return Reply(frames=tuple(frames), content_type=content_type, cut_after=cut_after)


def sse_reply(
    events: Sequence[tuple[str | None, Any]],
    *,
    cut_after: int | None = None,
    before_event: Callable[[int], Awaitable[None]] | None = None,
) -> Reply:
    """A stream of ``events``; ``cut_after`` drops the connection after that many.

    Without ``before_event`` the events go out in one burst; with it, every
    event after the first waits for ``before_event(its index)``, the ones before
    it sent and drained: a stream whose pieces come apart.
    """
    return Reply(events=tuple(events), cut_after=cut_after, before_event=before_event)


@dataclass
class ProviderServer:
    """``async with ProviderServer() as server``: ``server.url`` is its base URL."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    unscripted: int = 0
    refuse: Callable[[RecordedRequest], Reply | None] | None = None
    port: int = 0
    """The port to listen on; ``0`` lets the system choose one."""
    keep_alive: bool = False
    """Answer further requests on a connection, as providers do, rather than close it."""
    connections: int = 0
    """How many connections the server took."""
    _server: asyncio.Server | None = None
    _open: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None, "the server is not running"
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``, in order."""
        self.replies.extend(replies)

    def assert_script_used(self) -> None:
        """Fail when a scripted reply is left or a request had none."""
        assert not self.replies, f"{len(self.replies)} scripted replies were not used"
        assert self.unscripted == 0, f"{self.unscripted} requests had no scripted reply"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._open:  # a kept-alive connection's handler waits for a request
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._open.add(writer)
        try:
            while await self._answer(reader, writer) and self.keep_alive:
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._open.discard(writer)
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        request = await _read_request(reader)
        if request is None:
            return False
        self.requests.append(request)
        refusal = self.refuse(request) if self.refuse is not None else None
        if refusal is not None:
            reply = refusal
        elif self.replies:
            reply = self.replies.popleft()
        else:
            self.unscripted += 1
            reply = json_reply(500, {"error": {"message": "no scripted reply"}})
        accepted = request.headers.get("accept-encoding", "")
        accepts = [e.split(";")[0].strip() for e in accepted.split(",")]
        compress = reply.compression is not None and reply.compression in accepts
        return await _send(writer, reply, self.keep_alive, compress)


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    line = await reader.readline()
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, value = header.decode("latin-1").split(":", 1)
        headers[name.strip().lower()] = value.strip()
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    body = json.loads(raw) if raw else None
    return RecordedRequest(method=method, path=path, headers=headers, body=body)


def _data(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


async def _send(
    writer: asyncio.StreamWriter, reply: Reply, keep_alive: bool, compress: bool = False
) -> bool:
    """Send ``reply``, compressed when ``compress``; whether the connection can take another request."""
    closing = "" if keep_alive else "connection: close\r\n"
    encoding = f"content-encoding: {reply.compression}\r\n" if compress else ""
    if reply.events is None and reply.frames is None:
        payload = json.dumps(reply.body).encode()
        if compress:
            payload = _compressed(payload, reply.compression)
        extra = "".join(f"{name}: {value}\r\n" for name, value in reply.headers)
        writer.write(
            f"HTTP/1.1 {reply.status} Scripted\r\ncontent-type: application/json\r\n"
            f"{encoding}content-length: {len(payload)}\r\n{extra}{closing}\r\n".encode()
            + payload
        )
        await writer.drain()
        return True
    writer.write(
        f"HTTP/1.1 200 OK\r\ncontent-type: {reply.content_type}\r\n{encoding}"
        f"transfer-encoding: chunked\r\n{closing}\r\n".encode()
    )
    chunks = reply.frames if reply.frames is not None else _event_chunks(reply.events or ())
    if compress:
        chunks = [_compressed(b"".join(chunks), reply.compression)]
    for sent, chunk in enumerate(chunks):
        if reply.cut_after is not None and sent == reply.cut_after:
            await writer.drain()
            return False  # no final chunk: the client sees a connection dropped mid-answer
        if reply.before_event is not None and sent:
            await writer.drain()
            await reply.before_event(sent)
        writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


def _compressed(payload: bytes, compression: str | None) -> bytes:
    if compression == "zstd":
        # httpx's optional zstd decoder: the zstd tests skip where it is not installed.
        zstandard = importlib.import_module("zstandard")
        compressed: bytes = zstandard.ZstdCompressor().compress(payload)
        return compressed
    return gzip.compress(payload) if compression == "gzip" else zlib.compress(payload)


def _event_chunks(events: Sequence[tuple[str | None, Any]]) -> list[bytes]:
    return [
        ((f"event: {name}\n" if name else "") + f"data: {_data(data)}\n\n").encode()
        for name, data in events
    ]
