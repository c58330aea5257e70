"""A wake-up a loop waits on again and again, with no Task per wait.

A worker's claim loop waits between rounds until a commit of its process may
have left work, a slot frees up, the worker stops, or a poll is due. It used to
wait on one Task per reason (three, plus one inside ``asyncio.wait_for``) and
cancel the others afterwards: a dozen Tasks a tool turn, each created, run and
cancelled on the event loop. ``WakeUp`` is one future and one timer per wait.
"""

from __future__ import annotations

import asyncio


def _settle(future: asyncio.Future[bool], woken: bool) -> None:
    if not future.done():
        future.set_result(woken)


class WakeUp:
    """Set by anyone on the loop's thread; waited on by one waiter at a time.

    A ``set`` while nobody waits is kept for the next ``wait``, so none is lost
    between two waits.
    """

    def __init__(self) -> None:
        self._future: asyncio.Future[bool] | None = None
        self._pending = False

    @property
    def waiting(self) -> bool:
        """Whether a waiter is suspended in ``wait`` now and nothing has ended its wait yet."""
        future = self._future
        return future is not None and not future.done()

    def set(self) -> None:
        """Wake the waiter, or the next one to wait."""
        future = self._future
        if future is None:
            self._pending = True
        elif not future.done():
            future.set_result(True)
        elif future.cancelled() or not future.result():
            # The wait's time ran out, or its waiter was cancelled, and the waiter has not
            # resumed yet: it will not return that it was woken, so this set is kept for the
            # next wait.
            self._pending = True

    async def wait(self, seconds: float) -> bool:
        """Wait at most ``seconds``; whether ``set`` was called since the last wait ended."""
        if self._pending:
            self._pending = False
            return True
        loop = asyncio.get_running_loop()
        future = self._future = loop.create_future()
        timer = loop.call_later(max(seconds, 0.0), _settle, future, False)
        try:
            woken: bool = await future
        finally:
            timer.cancel()
            self._future = None
        return woken
