"""Heartbeats while a long call of a Step runs (a model, tool or compaction call)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from types import TracebackType

from dex_agents.ports.step_contexts import StepContext

BACKGROUND_HEARTBEAT_INTERVAL = timedelta(seconds=20)
"""How often the session heartbeats while a runner call runs."""


class BackgroundHeartbeat:
    """``async with BackgroundHeartbeat(context)``: a heartbeat every ``interval`` while the
    body runs, the first one ``interval`` after it begins.

    Most calls end long before the first beat is due: until then a timer, not a Task
    created and cancelled for every model and tool call. A class, not an
    ``asynccontextmanager``: the async generator cost 14 K instructions a call (3 a turn).
    """

    __slots__ = ("_beating", "_context", "_seconds", "_timer")

    def __init__(
        self, context: StepContext, interval: timedelta = BACKGROUND_HEARTBEAT_INTERVAL
    ) -> None:
        self._context = context
        self._seconds = interval.total_seconds()
        self._beating: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._seconds, self._start)

    def _start(self) -> None:
        self._beating = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # a missed heartbeat is the timeout's to judge
                await self._context.heartbeat()
            await asyncio.sleep(self._seconds)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        beating = self._beating
        if beating is not None:
            beating.cancel()
            # asyncio.wait, not ``await beating`` in suppress(CancelledError): that also
            # swallowed a cancellation of the call itself (its Worker stopping, its execute
            # timeout) arriving while the beat ended, and the Step ran on past it.
            await asyncio.wait((beating,))
