"""``BackgroundHeartbeat``: beats while a long call runs, none for a call that ends first."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import cast

from dex_agents.app.background_heartbeat import BackgroundHeartbeat
from dex_agents.ports.step_contexts import StepContext
from dex_agents.testing import wait_until


class CountingContext:
    """The one part of a ``StepContext`` a heartbeat uses; the second beat fails."""

    def __init__(self) -> None:
        self.beats = 0

    async def heartbeat(self, checkpoint: str | None = None) -> None:
        self.beats += 1
        if self.beats == 2:
            raise RuntimeError("the store is away")  # a missed beat: the next one still comes


async def test_a_call_that_ends_before_the_first_beat_is_due_beats_never() -> None:
    context = CountingContext()
    async with BackgroundHeartbeat(cast(StepContext, context), timedelta(milliseconds=20)):
        pass
    await asyncio.sleep(0.05)
    assert context.beats == 0


async def test_a_long_call_beats_until_it_ends_even_after_a_failed_beat() -> None:
    context = CountingContext()
    async with BackgroundHeartbeat(cast(StepContext, context), timedelta(milliseconds=1)):
        await wait_until("three heartbeats", lambda: context.beats >= 3 or None)
    ended_at = context.beats
    await asyncio.sleep(0.02)
    assert context.beats == ended_at


class SlowToStopContext:
    """A heartbeat that, cancelled, takes a moment to end (a store write finishing)."""

    def __init__(self) -> None:
        self.beats = 0
        self.stopping = asyncio.Event()

    async def heartbeat(self, checkpoint: str | None = None) -> None:
        self.beats += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.stopping.set()
            await asyncio.sleep(0.01)
            raise


async def test_a_cancellation_that_comes_while_the_beat_stops_cancels_the_call() -> None:
    # The exit waits for the cancelled beat; a cancellation of the call in that wait (its
    # Worker stopping, its execute timeout) is the call's, not the beat's to swallow.
    context = SlowToStopContext()
    ran_on: list[str] = []

    async def call() -> None:
        async with BackgroundHeartbeat(cast(StepContext, context), timedelta(milliseconds=1)):
            await wait_until("a heartbeat", lambda: context.beats or None)
        ran_on.append("after the call")

    task = asyncio.create_task(call())
    await context.stopping.wait()
    task.cancel()
    await asyncio.wait((task,))
    assert task.cancelled()
    assert ran_on == []
