"""The workers of one process that a damaged file stops, so its clients' waits say so.

A damaged page that is no session's (``docs/embedded-engine.md``, "Damaged pages
that are no session's") fails every claim round of a worker, which retries it
until a person repairs the file: no Step runs. A client of the same process
that waited for a session (``wait_for_user``, a Stream read with a long poll)
met nothing it could not read, and waited out its whole timeout (5 minutes by
default for ``wait_for_user``) for a turn that could not come, with the reason
in the log alone (until 2026-12-07). Now a worker notes here a damaged-file
fault of its claim round that lasted ``STALLED_AFTER_TRIES`` tries in a row, and
each wait of the process for a Stream raises it (``StoreCorruptError``, naming
the file and what to do) until that round commits again; a wait already waiting
is woken to raise it. A client of another process cannot see this worker's
fault and waits to its timeout, as before. Nor does a wait know the file was
repaired before the worker's next try (within ``MAX_STORE_RETRY_DELAY``, 2 s):
one that starts in between still raises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeGuard

from dex_agents.adapters.local.store_errors import (
    StoreCorruptError,
    StoredValueError,
    StoreError,
)

STALLED_AFTER_TRIES = 3
"""How many failed tries in a row make a worker's damaged-file fault a stall (about 0.35 s
of backoff)."""


def is_damaged_file(error: StoreError) -> TypeGuard[StoreCorruptError]:
    """Whether ``error`` is a damaged page that is no one session's.

    A page under one session's values (``StoredValueError``, which the store raises
    as the cause of its ``StoreCorruptError``) fails one claim round, and the next
    leases that session's Step without its state: it stalls nothing, though rounds
    that meet several such sessions fail one after another.
    """
    return isinstance(error, StoreCorruptError) and not isinstance(
        error.__cause__, StoredValueError
    )


class StalledWorkers:
    """The damaged-file fault of each worker of one engine that its claim rounds cannot pass."""

    def __init__(self, stalled: Callable[[], None] = lambda: None) -> None:
        """``stalled`` is called, on the thread of ``note``, when a worker becomes stalled:
        the waits that began before must end, and find the stall when they look again."""
        self._lock = threading.Lock()
        self._tries: dict[str, int] = {}  # each worker's damaged-file failures in a row
        self._faults: dict[str, StoreCorruptError] = {}
        self._stalled = stalled

    def note(self, worker_id: str, error: StoreError | None) -> None:
        """Note that ``worker_id``'s claim round failed with ``error``, or committed (``None``)."""
        began = False
        with self._lock:
            if error is None:
                self._tries.pop(worker_id, None)
                self._faults.pop(worker_id, None)
            elif is_damaged_file(error):
                tries = self._tries[worker_id] = self._tries.get(worker_id, 0) + 1
                if tries >= STALLED_AFTER_TRIES:
                    began = worker_id not in self._faults
                    self._faults[worker_id] = error
            elif isinstance(error, StoreCorruptError):
                self._tries.pop(worker_id, None)  # one session's page: the next round goes on
        if began:
            # Until 2026-12-07 only a wait that began after this raised: a Stream poll
            # already waiting ran to its timeout.
            self._stalled()

    @property
    def stalled(self) -> bool:
        """Whether a worker of this engine is stalled by a damaged file now."""
        return bool(self._faults)

    def check(self) -> None:
        """Raise ``StoreCorruptError`` when a worker of this engine is stalled by a damaged file."""
        if not self._faults:  # the common case, without the lock
            return
        with self._lock:
            fault = next(iter(self._faults.values()), None)
        if fault is not None:
            # A new error for each waiter: one object raised in many tasks shares its traceback.
            raise StoreCorruptError(f"no Step of this process can run: {fault}")
