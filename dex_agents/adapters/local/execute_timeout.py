"""An execute attempt's timeout: ``asyncio.timeout``'s rule, with one timer and no state enum.

The attempt sees its timeout as a cancellation the engine asked for, as Dex cancels an
invocation past its deadline and as a missed heartbeat stops an attempt here: its Step's
spans are kept (an error span of a failed attempt). Seen as a Worker closing, a timed-out
attempt exported no span though its retry did.

Until 2026-12-07 this was an ``asynccontextmanager`` around ``asyncio.timeout(None)`` and a
timer of its own: 54.7 K instructions an attempt, about half of them the async generator
(its creation, the loop's first-iteration hook and its weak set) and ``asyncio.Timeout``'s
reads of its ``_State`` members through Python 3.11's slow enum attribute hook. This keeps
``Timeout``'s rule as written: the expiry cancels the attempt's task, and the exit turns
that cancellation into ``TimeoutError`` only when no other cancellation came since the
entry (``uncancel`` back to the count the entry saw); any other stays a cancellation.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import TracebackType
from typing import Any, Protocol


class CancellableContext(Protocol):
    """The attempt's context, told that the engine asked for the cancellation."""

    cancellation_requested: bool


class ExecuteTimeout:
    """``async with ExecuteTimeout(context, limit)``: past ``limit`` the body is cancelled,
    ``context.cancellation_requested`` is set first, and the block raises ``TimeoutError``."""

    __slots__ = ("_cancelling", "_context", "_expired", "_handle", "_limit", "_task")

    # Set on entry, before the timer that reads them exists and before the exit.
    _task: asyncio.Task[Any]
    _handle: asyncio.TimerHandle

    def __init__(self, context: CancellableContext, limit: timedelta) -> None:
        self._context = context
        self._limit = limit
        self._expired = False
        self._cancelling = 0

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("an execute timeout runs inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._handle = asyncio.get_running_loop().call_later(
            self._limit.total_seconds(), self._expire
        )

    def _expire(self) -> None:
        self._context.cancellation_requested = True
        self._expired = True
        self._task.cancel()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._handle.cancel()
        if (
            self._expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            # No cancellation but the expiry's came since the entry: this block's to handle.
            raise TimeoutError from exc
