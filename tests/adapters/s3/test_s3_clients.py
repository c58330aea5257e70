"""SharedClients: calls that overlap on an event loop share one client; none outlives them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dex_agents.adapters.media.s3_clients import SharedClients
from dex_agents.domain.errors import MediaStoreError


class FakeClient:
    """A client's creator context as aiobotocore returns it: closed by ``__aexit__``."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False

    async def __aexit__(self, *exc_info: Any) -> None:
        self.closed = True


class Opener:
    """Opens numbered fake clients; ``gate`` holds an opening until set, ``failures`` fail it."""

    def __init__(self) -> None:
        self.opened: list[FakeClient] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.failures = 0
        self.cancelled = 0
        self.ignores_cancel = False

    async def __call__(self) -> tuple[Any, Any]:
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            if not self.ignores_cancel:
                raise
        if self.failures:
            self.failures -= 1
            raise MediaStoreError("could not open an S3 client")
        client = FakeClient(len(self.opened) + 1)
        self.opened.append(client)
        return client, client


async def _use(clients: SharedClients, until: asyncio.Event | None = None) -> int:
    async with clients.client() as client:
        if until is not None:
            await until.wait()
        assert not client.closed
        number: int = client.number
        return number


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_overlapping_calls_share_a_client_the_last_closes_and_later_calls_open_anew() -> None:
    opener = Opener()
    clients = SharedClients(opener)
    first_done, second_done = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(_use(clients, first_done))
    second = asyncio.create_task(_use(clients, second_done))
    await _settle()
    first_done.set()
    assert await first == 1
    assert [c.closed for c in opener.opened] == [False]  # the second call still uses it
    second_done.set()
    assert await second == 1
    assert [c.closed for c in opener.opened] == [True]
    assert await _use(clients) == 2
    assert [c.closed for c in opener.opened] == [True, True]


async def test_a_failed_opening_fails_every_waiting_call_and_the_next_call_opens_again() -> None:
    opener = Opener()
    opener.gate.clear()
    opener.failures = 1
    clients = SharedClients(opener)
    waiting = [asyncio.create_task(_use(clients)) for _ in range(2)]
    await _settle()
    opener.gate.set()
    for call in waiting:
        with pytest.raises(MediaStoreError, match=r"^could not open an S3 client$"):
            await call
    assert await _use(clients) == 1
    assert [c.closed for c in opener.opened] == [True]


async def test_a_cancelled_call_leaves_the_client_to_the_others() -> None:
    opener = Opener()
    clients = SharedClients(opener)
    never, done = asyncio.Event(), asyncio.Event()
    cancelled = asyncio.create_task(_use(clients, never))
    other = asyncio.create_task(_use(clients, done))
    await _settle()
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert [c.closed for c in opener.opened] == [False]
    done.set()
    assert await other == 1
    assert [c.closed for c in opener.opened] == [True]


async def test_when_every_call_leaves_during_the_opening_it_is_cancelled() -> None:
    opener = Opener()
    opener.gate.clear()
    clients = SharedClients(opener)
    calls = [asyncio.create_task(_use(clients)) for _ in range(2)]
    await _settle()
    for call in calls:
        call.cancel()
    for call in calls:
        with pytest.raises(asyncio.CancelledError):
            await call
    await _settle()
    assert (opener.cancelled, opener.opened) == (1, [])
    opener.gate.set()
    assert await _use(clients) == 1  # a new opening, not the cancelled one


async def test_an_opening_that_ends_after_every_call_left_is_closed() -> None:
    opener = Opener()
    opener.gate.clear()
    opener.ignores_cancel = True  # the cancellation comes too late to stop it
    clients = SharedClients(opener)
    call = asyncio.create_task(_use(clients))
    await _settle()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await _settle()
    assert opener.cancelled == 1
    assert [c.closed for c in opener.opened] == [True]


async def test_a_call_cancelled_during_the_opening_leaves_it_to_the_others() -> None:
    opener = Opener()
    opener.gate.clear()
    clients = SharedClients(opener)
    cancelled, other = (asyncio.create_task(_use(clients)) for _ in range(2))
    await _settle()
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    opener.gate.set()
    assert await other == 1
    assert (opener.cancelled, [c.closed for c in opener.opened]) == (0, [True])
