"""Looks at the store after another process's commit signals that it wrote.

Where the store signals its commits (``WatchableWrites``: SQLite on Linux), the
engine reads that signal on the event loop of its first wait. A signal is looked
at by reading the change counter: when it moved since this process last read it,
another process committed, and the waiters wake: the readers at once, the claim
loops at most once per ``WORKER_WAKE_SPACING``. A signal comes once its commit
is visible, so a look that finds the counter unmoved has nothing left to find:
this process had read that commit already. The signals of this process's own
commits never get here: ``GroupCommitQueue`` takes them right before the counter
read that follows each commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from dex_agents.adapters.local.group_commit import GroupCommitQueue
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.store_capabilities import WatchableWrites, WriteWatch

WORKER_WAKE_SPACING = timedelta(milliseconds=2)
"""The least time between two wakes of this process's claim loops that other processes'
commits make: the commits that come sooner wake them together once it has passed. Beside a
busy client process a worker got a commit every millisecond or two, and a claim round for each
cost the throughput run 5% when this spacing came in (it then spaced every look). Readers (a
client following its sessions' Streams) are woken for each commit as it lands: an event loop
sleeps no shorter than a millisecond, so a wake put off to the spacing's end saw a turn's last
commit 1 to 2 ms late."""

WRITE_RECHECK = timedelta(milliseconds=1)
"""How soon a write signal is looked at again when this process was committing on a store thread
at the look (a read then could not tell that commit from another process's), and again after
that until a look can tell."""


class WriteLooks:
    """One engine's reading of its store's write signal, from the first wait to ``close``."""

    def __init__(
        self,
        commits: GroupCommitQueue,
        wake_readers: Callable[[], None],
        wake_workers: Callable[[], None],
    ) -> None:
        self._commits = commits
        self._wake_readers = wake_readers  # wakes the engine's change waiters (Stream readers)
        self._wake_workers = wake_workers  # wakes its claim loops
        self._watch: WriteWatch | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tried = False
        self._ended = False
        # A look again after one that could not tell (this process committing on a store thread).
        self._pending: asyncio.TimerHandle | None = None
        self._last_worker_wake = float("-inf")  # the loop time of the latest wake of the workers
        self._worker_wake: asyncio.TimerHandle | None = None  # the workers' wake put off

    def start(self, store: FlowStore, loop: asyncio.AbstractEventLoop) -> None:
        """Read ``store``'s write signal on ``loop`` from now on; only the first call counts.

        Another process's commit is then seen as it lands, not at the next poll: a
        client process's message reaches a worker process at once, and the worker's
        reply the client. The polls stay, for a store or a system with no signal, and
        for a writer that does not signal (``wal_writes.py``).
        """
        if self._tried or self._ended:
            return
        self._tried = True
        if not isinstance(store, WatchableWrites):
            return
        watch = store.watch_writes()
        if watch is None:
            return
        self._watch, self._loop = watch, loop
        loop.add_reader(watch.fileno(), self._written)
        self._commits.write_signals = watch

    def _written(self) -> None:
        """Another process committed: look now. A look is one ``PRAGMA data_version`` read; what
        a look that finds a commit wakes is spaced (``WORKER_WAKE_SPACING``), not the look."""
        watch = self._watch
        if watch is None:
            return
        watch.drain()
        if self._pending is not None:  # a look again after one that could not tell: sooner
            self._pending.cancel()
            self._pending = None
        self._look()

    def _look_due(self) -> None:
        self._pending = None
        self._look()

    def _look(self) -> None:
        """Wake the readers, and the claim loops spaced, if the counter moved; if this process
        was committing on a store thread, look again shortly."""
        if self._ended or self._loop is None:
            return
        try:
            moved = self._commits.counter_moved()
        except Exception:
            moved = True  # the waiters read the counter again, and meet what failed there
        if moved:
            self._commits.note_commit_elsewhere()
            self._wake_readers()
            self._wake_workers_spaced()
        elif moved is None and self._pending is None:
            self._pending = self._loop.call_later(WRITE_RECHECK.total_seconds(), self._look_due)

    def _wake_workers_spaced(self) -> None:
        if self._worker_wake is not None or self._loop is None:
            return  # a wake is due already, and serves this commit too
        wait = self._last_worker_wake + WORKER_WAKE_SPACING.total_seconds() - self._loop.time()
        if wait > 0:
            self._worker_wake = self._loop.call_later(wait, self._wake_workers_now)
        else:
            self._wake_workers_now()

    def _wake_workers_now(self) -> None:
        self._worker_wake = None
        if self._ended or self._loop is None:
            return
        self._last_worker_wake = self._loop.time()
        self._wake_workers()

    def end(self) -> None:
        """Look no more: the engine is closing. ``close`` frees the signal afterwards."""
        self._ended = True

    def close(self) -> None:
        """Close the write signal; call it once no commit runs on the store thread, whose
        commits take the signals of their own writes."""
        self._ended = True
        watch, loop = self._watch, self._loop
        self._watch = self._loop = None
        if watch is None or loop is None:
            return
        self._commits.write_signals = None

        def stop() -> None:
            for timer in (self._pending, self._worker_wake):
                if timer is not None:
                    timer.cancel()
            self._pending = self._worker_wake = None
            if not loop.is_closed():
                loop.remove_reader(watch.fileno())
            watch.close()

        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop.is_running() and loop is not here:
            loop.call_soon_threadsafe(stop)  # its selector belongs to the loop's own thread
        else:
            stop()
