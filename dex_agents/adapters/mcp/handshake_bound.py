"""The bound of a connection's handshake: each request's ``connection_timeout``.

"What a call does" bounds connecting and each handshake request by
``connection_timeout``. The SDK bounds ``initialize`` by the client's read timeout,
but its ``server/discover`` probe by its own 10 seconds whatever that says, so a
1 second timeout held an attempt 11 seconds. ``HandshakeBound`` is one
``asyncio.timeout`` around connecting and the handshake that starts again, at
``connection_timeout``, whenever the client sends a handshake request
(``watched`` sees it on the transport's write stream): the probe ends at the
smaller of the two, and ``initialize`` after a probe that got no answer gets the
whole ``connection_timeout`` of its own, so a stdio server slow to start, whose
requests wait in its pipe, still connects when it answers within 10 seconds plus
``connection_timeout``.

asyncio's timeout, not anyio's: its scope may end while the client's task groups
stay open, and on expiry the client's own exit closes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from types import TracebackType
from typing import Any, Protocol

from mcp.client import Transport
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import REQUEST_TIMEOUT, JSONRPCRequest

from dex_agents.adapters.mcp.interruptions import is_connection_interruption

HANDSHAKE_METHODS = frozenset({"server/discover", "initialize"})
"""The requests of a handshake: the 2026-07-28 probe and the older servers' fallback."""


class HandshakeBound:
    """``async with bound.timeout():`` around connecting and the handshake of one attempt.

    ``started(method)`` restarts it when a handshake request is sent; ``ended()`` stops
    it watching, so a request sent later on the connection changes nothing.
    """

    def __init__(self, connection_timeout: timedelta) -> None:
        self._connection_timeout = connection_timeout
        self._timeout = asyncio.timeout(connection_timeout.total_seconds())
        self._method: str | None = None
        self._watching = True

    def timeout(self) -> asyncio.Timeout:
        """The timeout to enter once, around connecting and the handshake."""
        return self._timeout

    def started(self, method: str) -> None:
        """A handshake request was sent: it has ``connection_timeout`` from now."""
        if not self._watching:
            return
        self._method = method
        loop = asyncio.get_running_loop()
        self._timeout.reschedule(loop.time() + self._connection_timeout.total_seconds())

    def ended(self) -> None:
        """The attempt is over: later requests are no handshake's."""
        self._watching = False

    def timed_out(self, error: BaseException) -> TimeoutError | None:
        """``error`` as the handshake's timeout, naming the request and the setting, or ``None``.

        The timeout expired, or the SDK's own timeout of ``initialize`` (the same
        ``connection_timeout``) fired first.
        """
        if not (self._timeout.expired() or _is_sdk_timeout(error)):
            return None
        waited = (
            "connecting took longer than"
            if self._method is None
            else f"no answer to {self._method} within"
        )
        return TimeoutError(
            f"{waited} connection_timeout ({self._connection_timeout}); a server slower "
            "to start needs a longer connection_timeout on its McpToolSource"
        )


def _is_sdk_timeout(error: BaseException) -> bool:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return (
        isinstance(error, MCPError)
        and error.code == REQUEST_TIMEOUT
        and is_connection_interruption(error)
    )


class _WriteStream(Protocol):
    """What the SDK's client uses of a transport's write stream."""

    async def send(self, item: SessionMessage, /) -> None: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None: ...


class _WatchedWriteStream:
    """A transport's write stream that tells ``bound`` when a handshake request goes out."""

    def __init__(self, inner: _WriteStream, bound: HandshakeBound) -> None:
        self._inner = inner
        self._bound = bound

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, JSONRPCRequest) and message.method in HANDSHAKE_METHODS:
            self._bound.started(message.method)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedWriteStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(kind, error, traceback)


@asynccontextmanager
async def watched(transport: Transport, bound: HandshakeBound) -> AsyncIterator[tuple[Any, Any]]:
    """``transport`` with its write stream watched for ``bound``'s handshake requests."""
    async with transport as (read_stream, write_stream):
        yield read_stream, _WatchedWriteStream(write_stream, bound)
