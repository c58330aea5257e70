"""An execute attempt's timeout keeps ``asyncio.timeout``'s rule: its expiry is a
``TimeoutError`` the engine asked for, and any other cancellation stays a cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

import pytest

from dex_agents.adapters.local.execute_timeout import ExecuteTimeout

SOON = timedelta(milliseconds=10)
NEVER = timedelta(hours=1)


class Context:
    """An attempt's context: only the flag the timeout sets."""

    def __init__(self) -> None:
        self.cancellation_requested = False


async def test_an_attempt_past_its_limit_is_cancelled_asked_for_and_raises_timeout() -> None:
    context = Context()
    seen: list[bool] = []

    async def attempt() -> None:
        async with ExecuteTimeout(context, SOON):
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                # The attempt sees, as it stops, that the engine asked for it.
                seen.append(context.cancellation_requested)
                raise

    task = asyncio.create_task(attempt())
    with pytest.raises(TimeoutError):
        await task
    assert seen == [True]
    assert task.cancelling() == 0


async def test_an_attempt_within_its_limit_runs_to_its_end_and_leaves_no_cancellation() -> None:
    context = Context()

    async def attempt() -> str:
        async with ExecuteTimeout(context, NEVER):
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # no cancellation is left to come after the block
        return "done"

    task = asyncio.create_task(attempt())
    assert await task == "done"
    assert not context.cancellation_requested
    assert task.cancelling() == 0


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    context = Context()
    inside = asyncio.Event()

    async def attempt() -> None:
        async with ExecuteTimeout(context, NEVER):
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(attempt())
    await inside.wait()
    task.cancel()  # a lease lost, a cancel_turn, a worker stopping
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not context.cancellation_requested


async def test_a_cancellation_from_elsewhere_beside_the_expiry_stays_a_cancellation() -> None:
    context = Context()
    inside = asyncio.Event()

    async def attempt() -> None:
        async with ExecuteTimeout(context, timedelta(0)):
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(attempt())
    await inside.wait()
    # The expiry, due at once, runs in the loop round that resumed this coroutine, after
    # it: the attempt, cancelled here first, resumes after both.
    task.cancel()  # a lease lost, a cancel_turn, a worker stopping
    with pytest.raises(asyncio.CancelledError):
        await task
    assert context.cancellation_requested


async def test_a_cancellation_caught_before_the_block_does_not_hide_its_expiry() -> None:
    context = Context()

    async def attempt() -> None:
        own = asyncio.current_task()
        assert own is not None
        own.cancel()
        # Caught and not uncancelled: the task's count of cancellations stays 1.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        async with ExecuteTimeout(context, SOON):
            await asyncio.Event().wait()

    with pytest.raises(TimeoutError):
        await asyncio.create_task(attempt())
    assert context.cancellation_requested
