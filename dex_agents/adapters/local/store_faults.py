"""How a worker lives through its store's faults: retry with capped backoff, log once per fault.

A read-only file, a full disk, an I/O error or a write lock held past the busy
timeout make a store transaction raise ``StoreError``. None of them is a reason
for a worker to stop: each clears by itself or when an operator acts, and a
stopped worker would leave every session stuck until someone restarts the
process. So the worker retries the transaction, waiting a little longer each
time up to ``MAX_STORE_RETRY_DELAY``; it logs a fault once when it appears and
once when it clears, not on every try.

A fault clears when a transaction that failed commits, not when any other one
does: a damaged page fails only the transactions that read it (a claim round),
and until 2026-12-07 each lease renewal or read that missed it logged "works
again", and the claim round's next try logged the fault anew, a pair of lines
about every second for as long as the file stayed damaged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from dex_agents.adapters.local.sqlite_store import StoreError

R = TypeVar("R")

FIRST_STORE_RETRY_DELAY = timedelta(milliseconds=50)
"""How long a worker waits before it retries a store transaction that failed the first time."""

MAX_STORE_RETRY_DELAY = timedelta(seconds=2)
"""The longest a worker waits between two tries of a failing store transaction."""


class StoreFaultLog:
    """Logs each distinct store fault once when it starts and once when it clears."""

    def __init__(self, logger: logging.Logger, worker_id: str) -> None:
        self._logger = logger
        self._worker_id = worker_id
        self._fault: str | None = None
        self._tries = 0

    @property
    def fault(self) -> str | None:
        """The fault now in force, or ``None``."""
        return self._fault

    def failed(self, error: StoreError) -> None:
        """Note a failed transaction; log it when its fault is new."""
        text = str(error)
        self._tries += 1
        if text != self._fault:
            self._fault = text
            self._logger.error(
                "%s: the session database failed; retrying until it works again: %s",
                self._worker_id,
                text,
            )

    def succeeded(self) -> None:
        """Note that a transaction that had failed committed; log the recovery if a fault was
        in force. A transaction that never failed says nothing of the fault: call nothing."""
        if self._fault is not None:
            self._logger.warning(
                "%s: the session database works again after %d failed tries",
                self._worker_id,
                self._tries,
            )
        self._fault = None
        self._tries = 0


def next_delay(delay: timedelta) -> timedelta:
    """The wait after ``delay``: doubled, at most ``MAX_STORE_RETRY_DELAY``."""
    return min(delay * 2, MAX_STORE_RETRY_DELAY)


async def until_stored(
    call: Callable[[], Awaitable[R]],
    faults: StoreFaultLog,
    *,
    give_up: Callable[[], bool] = lambda: False,
    stalled: Callable[[StoreError | None], None] | None = None,
) -> R:
    """Run ``call`` until it raises no ``StoreError``; re-raise the last one once ``give_up()``.

    ``stalled`` is told each failure, and ``None`` once ``call`` succeeds after failing
    (``StalledWorkers.note``).
    """
    delay = FIRST_STORE_RETRY_DELAY
    tries = 0
    while True:
        try:
            result = await call()
        except StoreError as error:
            tries += 1
            faults.failed(error)
            if stalled is not None:
                stalled(error)
            if give_up():
                raise
            await asyncio.sleep(delay.total_seconds())
            delay = next_delay(delay)
            continue
        if tries:
            faults.succeeded()
            if stalled is not None:
                stalled(None)
        return result
