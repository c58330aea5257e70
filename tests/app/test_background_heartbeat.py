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
