"""Looks at the store after another process's commit signals that it wrote.

Where the store signals its writes (``WatchableWrites``: SQLite on Linux), the
engine reads that signal on the event loop of its first wait. A signal is looked
at by reading the change counter: when it moved since this process last read it,
another process committed, and every waiter wakes. The signals of this process's
own commits never get here: ``GroupCommitQueue`` takes them right before the
counter read that follows each commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from dex_agents.adapters.local.group_commit import GroupCommitQueue
from dex_agents.ports.flow_store import FlowStore, WatchableWrites, WriteWatch

WRITE_LOOK_SPACING = timedelta(milliseconds=2)
"""The least time between two looks that write signals make: the signals that come sooner are
looked at together when it has passed. A process beside a busy one got a signal every
millisecond or two, and a look for each woke its waiters each time, where one look serves many."""

WRITE_RECHECK = timedelta(milliseconds=1)
"""How soon a write signal is looked at again when the counter had not moved (the commit that
wrote was not visible yet), or this process was committing on a store thread (a read then could
not tell that commit from another process's). A look that finds nothing the second time leaves
the rest to the polls."""


class WriteLooks:
    """One engine's reading of its store's write signal, from the first wait to ``close``."""

    def __init__(self, commits: GroupCommitQueue, wake_all: Callable[[], None]) -> None:
        self._commits = commits
        self._wake_all = wake_all  # wakes every waiter of the engine
        self._watch: WriteWatch | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tried = False
        self._ended = False
        self._pending: asyncio.TimerHandle | None = None
        # Whether the look scheduled is tried once more if it finds the counter unmoved.
        self._pending_again = False
        self._last_look = float("-inf")  # the loop time of the latest look

    def start(self, store: FlowStore, loop: asyncio.AbstractEventLoop) -> None:
        """Read ``store``'s write signal on ``loop`` from now on; only the first call counts.

        Another process's commit is then seen as it lands, not at the next poll: a
        client process's message reaches a worker process at once, and the worker's
        reply the client. The polls stay, for a store or a system with no signal, and
        for a signal read before the commit it came from was visible.
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
        """Another process wrote: look now, or once ``WRITE_LOOK_SPACING`` has passed since the
        latest look."""
        watch, loop = self._watch, self._loop
        if watch is None or loop is None:
            return
        watch.drain()
        wait = self._last_look + WRITE_LOOK_SPACING.total_seconds() - loop.time()
        if self._pending is not None:
            self._pending_again = True  # the look scheduled covers this signal too
        elif wait > 0:
            self._schedule(wait, again=True)
        else:
            self._look(again=True)

    def _schedule(self, delay: float, again: bool) -> None:
        assert self._loop is not None
        self._pending_again = again
        self._pending = self._loop.call_later(delay, self._look_due)

    def _look_due(self) -> None:
        self._pending = None
        self._look(self._pending_again)

    def _look(self, again: bool) -> None:
        """Wake every waiter if the counter moved; if it did not, look ``again`` shortly."""
        if self._ended or self._loop is None:
            return
        self._last_look = self._loop.time()
        try:
            moved = self._commits.counter_moved()
        except Exception:
            moved = True  # the waiters read the counter again, and meet what failed there
        if moved:
            self._commits.note_commit_elsewhere()
            self._wake_all()
        elif (moved is None or again) and self._pending is None:
            self._schedule(WRITE_RECHECK.total_seconds(), again=moved is None)

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
            if self._pending is not None:
                self._pending.cancel()
                self._pending = None
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
