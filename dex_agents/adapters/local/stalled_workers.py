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
the file and what to do) until that round commits again. A client of another
process cannot see this worker's fault and waits to its timeout, as before. Nor
does a wait know the file was repaired before the worker's next try (within
``MAX_STORE_RETRY_DELAY``, 2 s): one that starts in between still raises.
"""

from __future__ import annotations

import threading

from dex_agents.adapters.local.store_errors import StoreCorruptError, StoreError

STALLED_AFTER_TRIES = 3
"""How many failed tries in a row make a worker's damaged-file fault a stall (about 0.35 s
of backoff): a damaged page under one session's values fails one claim round, then that
session's Step is leased without its state, and stalls nothing."""


class StalledWorkers:
    """The damaged-file fault of each worker of one engine that its claim rounds cannot pass."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: dict[str, StoreCorruptError] = {}

    def note(self, worker_id: str, error: StoreError | None, tries: int = 0) -> None:
        """Note ``worker_id``'s store fault after ``tries`` failed tries in a row, or that it
        cleared (``None``); only a damaged file's that lasted counts."""
        with self._lock:
            if isinstance(error, StoreCorruptError) and tries >= STALLED_AFTER_TRIES:
                self._faults[worker_id] = error
            elif error is None:
                self._faults.pop(worker_id, None)

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
