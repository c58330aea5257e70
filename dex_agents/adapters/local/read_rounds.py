"""The reads one pass of the event loop asks for, run in one read transaction.

A client beside busy workers follows many sessions' Streams at once, and one
commit that gave events to many of them wakes all their readers in the same
pass of the loop: each then read in a transaction of its own, one after the
other (on 2026-12-07, 11.6 reads a turn in 416 passes over 500 turns, a median
of 16 reads a pass), and each paid the transaction's own statements (``BEGIN``,
``PRAGMA data_version``, ``COMMIT``, and the change log's read when another
connection had committed) for the one statement it needed.

A read is queued before its caller yields to the loop (``LocalEngine.read``);
the first caller to come back runs every read still queued, its own among
them, in one ``try_read``, and the others find their outcome there. Each read
still yields once, as before, and sees a snapshot taken after it was asked
for; reads of one pass share the snapshot, as reads run in the same instant
would. A read whose work raises is run again alone, so its caller gets the
error a read alone gives (the store translates SQLite's and a damaged value's
errors for the transaction), and so is every read after it in the round, since
an error of SQLite may have ended the transaction for them too, and so is a
read that a cancelled runner left behind. A round whose transaction raises
(the memory store checks that no read wrote once every work has run) gives no
values: each of its reads runs alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from dex_agents.ports.flow_store import InlineFlowStore, StoreTransaction, StoreWouldWaitError

R = TypeVar("R")


class QueuedRead(Generic[R]):
    """One read in the queue: its work, whether a round took it, and once run, its value."""

    __slots__ = ("done", "taken", "value", "work")

    def __init__(self, work: Callable[[StoreTransaction], R]) -> None:
        self.work = work
        self.taken = False
        self.done = False
        self.value: Any = None


class ReadRounds:
    """The queues of reads of one engine, one for each thread's event loop (see the module's
    docstring): an engine may serve loops on several threads, and each loop's reads run on
    its own thread."""

    def __init__(self) -> None:
        self._threads = threading.local()

    def _queued(self) -> list[QueuedRead[Any]]:
        try:
            queued: list[QueuedRead[Any]] = self._threads.queued
        except AttributeError:
            queued = self._threads.queued = []
        return queued

    def queue(self, work: Callable[[StoreTransaction], R]) -> QueuedRead[R]:
        """Queue ``work``; its caller yields to the loop, then calls ``run``."""
        read = QueuedRead(work)
        self._queued().append(read)
        return read

    def drop(self, read: QueuedRead[Any]) -> None:
        """Take ``read`` out of the queue unless a round took it (its caller was cancelled)."""
        if not read.taken:
            self._queued().remove(read)

    def run(self, store: InlineFlowStore, read: QueuedRead[R]) -> R:
        """``read``'s value: run with every read still queued in one ``try_read`` unless a
        round ran it already; alone when its work or the round's transaction raised there,
        or when it is alone.
        ``StoreWouldWaitError`` when the store is busy, with nothing run: the reads stay
        queued for their own callers."""
        if not read.taken:
            queued = self._queued()
            if len(queued) == 1:
                # Alone (a read stays queued until a round takes it), as most reads of a
                # turn are: no round to set up, and a busy store leaves no other to requeue.
                queued.clear()
                read.taken = True
                return store.try_read(read.work)
            self._threads.queued = []
            for each in queued:
                each.taken = True
            try:
                store.try_read(lambda tx: _run_each(tx, queued))
            except StoreWouldWaitError:
                for each in queued:
                    each.taken = False
                self._queued()[:0] = queued
                raise
            except Exception:
                # Not the error of any one read, but the transaction's: the values it gave
                # stand on nothing (the memory store undoes a read that wrote, and raises,
                # once every work has run), so each read runs alone and gets its own outcome.
                for each in queued:
                    each.done = False
        if read.done:
            value: R = read.value
            return value
        return store.try_read(read.work)


def _run_each(tx: StoreTransaction, reads: list[QueuedRead[Any]]) -> None:
    # Run again from the start when the store runs this again (a snapshot that moved under
    # the kept rows): what the first try read may be stale.
    for read in reads:
        read.done = False
    for read in reads:
        try:
            read.value = read.work(tx)
        except Exception:
            # This read and every one after it run alone: an error may have ended the
            # transaction, and the reads after it must not see a snapshot of their own
            # per statement.
            return
        read.done = True
