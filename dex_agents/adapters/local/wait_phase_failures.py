"""How often a wait phase that keeps raising runs again, and when its failure is logged.

A wait phase has no attempts and no failure route: one that raises runs again
later, for as long as its Step execution is active (a Dex server retries a
failing ``wait_for`` too). Until 2026-12-07 it ran again every second and
logged a traceback each time, so a session whose waiting Step read a damaged
value (``UnreadableStateError``) or whose ``wait_for`` had a bug filled the log
with one traceback a second for ever. Now each execution's consecutive failures
back off, doubling from ``FIRST_WAIT_PHASE_RETRY_DELAY`` up to
``MAX_WAIT_PHASE_RETRY_DELAY``, and its traceback is logged once per worker,
and again only when the failure changes; the later ones are logged at debug
level. A wait phase that succeeds starts over.
"""

from __future__ import annotations

from datetime import timedelta

import attrs

FIRST_WAIT_PHASE_RETRY_DELAY = timedelta(seconds=1)
"""How long a wait phase that raised for the first time waits before it runs again."""

MAX_WAIT_PHASE_RETRY_DELAY = timedelta(minutes=1)
"""The longest a wait phase that keeps raising waits between two runs."""

MOST_TRACKED_EXECUTIONS = 4096
"""How many failing executions a worker remembers; the oldest is forgotten past it (one
cancelled while failing never succeeds, so nothing else would drop it)."""


@attrs.frozen(kw_only=True)
class WaitPhaseRetry:
    """What a worker does after a wait phase raised: wait ``delay``, and whether to log it
    with its traceback (``loud``) or at debug level."""

    delay: timedelta
    loud: bool
    failures: int
    """The execution's consecutive failed wait phases in this worker, this one included."""


@attrs.define
class _Failing:
    failures: int
    error: str


class WaitPhaseFailures:
    """The consecutive wait-phase failures of each Step execution a worker ran."""

    def __init__(self) -> None:
        self._failing: dict[int, _Failing] = {}

    def failed(self, execution_id: int, error: BaseException) -> WaitPhaseRetry:
        """Note that execution ``execution_id``'s wait phase raised ``error``; say what next."""
        text = f"{type(error).__name__}: {error}"
        failing = self._failing.pop(execution_id, None)
        if failing is None:
            failing = _Failing(failures=0, error="")
        loud = failing.error != text
        failing.failures += 1
        failing.error = text
        self._failing[execution_id] = failing  # the newest last, so the oldest goes first
        while len(self._failing) > MOST_TRACKED_EXECUTIONS:
            del self._failing[next(iter(self._failing))]
        return WaitPhaseRetry(
            delay=retry_delay(failing.failures), loud=loud, failures=failing.failures
        )

    def succeeded(self, execution_id: int) -> None:
        """Forget execution ``execution_id``'s failures: its wait phase submitted its wait."""
        self._failing.pop(execution_id, None)


def retry_delay(failures: int) -> timedelta:
    """The wait before the next run of a wait phase that failed ``failures`` times in a row."""
    delay = FIRST_WAIT_PHASE_RETRY_DELAY
    for _ in range(failures - 1):
        delay *= 2
        if delay >= MAX_WAIT_PHASE_RETRY_DELAY:
            return MAX_WAIT_PHASE_RETRY_DELAY
    return delay
