"""The S3 clients of one ``S3MediaStore``: the calls that overlap on an event loop share one.

Creating an aiobotocore client costs about 12 ms of CPU (botocore builds the endpoint
rules, a client class and its event hooks each time), more than a read on loopback.
The store opens a client for its calls so that it works from any event loop and needs
no closing; calls that overlap on one loop, such as the reads of a model call's images
(``load_images`` runs them at once), share one client, and the last of them to end
closes it, so no client outlives the calls that use it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

OpenClient = Callable[[], Coroutine[Any, Any, tuple[Any, Any]]]
"""Opens a client: returns its entered creator context (closed with ``__aexit__``) and it."""


class _Shared:
    __slots__ = ("opening", "users")

    def __init__(self, opening: asyncio.Task[tuple[Any, Any]]) -> None:
        self.opening = opening
        self.users = 0


class SharedClients:
    """Hands out clients made by ``open_client``: one per event loop while calls use it."""

    def __init__(self, open_client: OpenClient) -> None:
        self._open = open_client
        self._by_loop: dict[asyncio.AbstractEventLoop, _Shared] = {}

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[Any]:
        """The loop's client, opened for this call unless another call holds it open.

        An opening that fails raises its error in every call waiting for it; a call after
        they have all left opens again.
        """
        loop = asyncio.get_running_loop()
        shared = self._by_loop.get(loop)
        if shared is None:
            shared = self._by_loop[loop] = _Shared(loop.create_task(self._open()))
        shared.users += 1
        try:
            # Shielded: a cancelled call must not cancel the opening the others wait for.
            _, client = await asyncio.shield(shared.opening)
            yield client
        finally:
            shared.users -= 1
            if shared.users == 0:
                del self._by_loop[loop]  # a call from now on opens a new client
                await _close(shared.opening)


def _failed(opening: asyncio.Task[tuple[Any, Any]]) -> bool:
    return opening.done() and (opening.cancelled() or opening.exception() is not None)


async def _close(opening: asyncio.Task[tuple[Any, Any]]) -> None:
    if not opening.done():
        opening.cancel()  # every call left while it was opening
        opening.add_done_callback(_close_when_opened)
        return
    if not _failed(opening):
        creator, _ = opening.result()
        await creator.__aexit__(None, None, None)


_LATE_CLOSES: set[asyncio.Task[Any]] = set()


def _close_when_opened(opening: asyncio.Task[tuple[Any, Any]]) -> None:
    # The cancellation came too late to stop the opening: close what it opened.
    if not _failed(opening):
        creator, _ = opening.result()
        closing = asyncio.get_running_loop().create_task(creator.__aexit__(None, None, None))
        _LATE_CLOSES.add(closing)
        closing.add_done_callback(_LATE_CLOSES.discard)
