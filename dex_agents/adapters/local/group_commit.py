"""Group commit: the write transactions that queue up together are committed together.

Each Step's result is one fsync'd commit, and on this engine a commit is mostly
the fsync. The works queued while the event loop runs one round of its ready
callbacks, or while a commit runs, are taken together and run as one store
transaction (``FlowStore.run_batch``), each in a savepoint of its own, so one
fsync makes many durable and a work that raises undoes only itself. A lone work
is a transaction of its own, with no savepoint: its failure rolls that
transaction back. The outcome each caller gets is its own work's:
its result or its exception, and for ``run_quietly`` whether the whole batch was
quiet (nothing in it left work for a claim round).

Where the commit runs: with an ``InlineFlowStore``, on the event loop's thread,
tried without waiting for any lock (``try_run_batch``). A batch that would wait
is tried again on the loop's thread, after pauses of 0.1 ms doubling up to 1 ms,
for up to ``LOOP_RETRY_BUDGET``, and what is queued meanwhile joins it; only then
does it go to the store thread, which waits for the lock in turn, commits it, and
hands the queue back to the loop's thread. Commits on the store thread cost the
processes of one file CPU: the works of a batch ran on that thread while the
loop's thread ran Steps, both wanting the GIL, each outcome came back through
the loop's self-pipe, and reads that found the store's connection busy went
there too. (A client's SQLite store stays seen as waiting between its tries, so
workers still step back for it: ``WriterTurnstile.try_begin``.) A store that
cannot try commits on the store thread only, draining the queue there until it
is empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dex_agents.ports.flow_store import (
    BatchOutcome,
    FlowStore,
    InlineFlowStore,
    StoreTransaction,
    StoreWouldWaitError,
)
from dex_agents.ports.store_capabilities import WatchableWrites, WriteWatch

R = TypeVar("R")

LOOP_RETRY_FIRST_PAUSE = 0.0001
"""Seconds before a batch that would wait is tried again on the loop's thread; doubled each
time up to ``LOOP_RETRY_LONGEST_PAUSE``."""

LOOP_RETRY_LONGEST_PAUSE = 0.001
"""The longest pause between tries on the loop's thread: a write lock is held for one commit."""

LOOP_RETRY_BUDGET = 0.2
"""Seconds a batch is tried on the loop's thread before it waits in turn on the store thread.

Longer than any commit of a busy worker (the longest held the lock 20 to 30 ms),
so the store thread waits only for a writer that holds the lock far longer, up
to the store's busy timeout. Between worker processes the tries are not in turn:
one may pass another's tries for up to this long. Two worker processes on one
file ran 10, 50 and 200 ms side by side; each longer one did better.
"""


@dataclass
class _Queued(Generic[R]):
    work: Callable[[StoreTransaction], R]
    durable: bool
    quiet: Callable[[R], bool] | None
    future: asyncio.Future[tuple[BatchOutcome, int, bool]]
    loop: asyncio.AbstractEventLoop


class GroupCommitQueue:
    """Write transactions of one process, committed in groups on the store's thread."""

    def __init__(
        self, store: FlowStore, executor: Executor, *, loop_retry_budget: float = LOOP_RETRY_BUDGET
    ) -> None:
        self._store = store
        # Checked once: a runtime Protocol check looks up every method.
        self.inline = store if isinstance(store, InlineFlowStore) else None
        """The store, when it can try transactions on the loop's thread; else ``None``."""
        self._executor = executor
        self._retry_budget = loop_retry_budget
        # The monotonic time of the first try of the batch being tried again, and the pause
        # before its next try; None while no batch waits.
        self._retrying_since: float | None = None
        self._retry_pause = LOOP_RETRY_FIRST_PAUSE
        self._lock = threading.Lock()
        self._queued: list[_Queued[Any]] = []
        self._draining = False
        # Noted as each batch commits, before any caller resumes: which task the loop runs
        # first then cannot make a claim loop take a quiet commit for a loud one.
        self.last_commit: tuple[int | None, bool] = (None, False)
        """The change counter after the latest commit, and whether that commit was quiet."""
        self.loud_commits = 0
        """How many commits were not quiet, counting those of other processes that a write
        signal showed (``note_commit_elsewhere``)."""
        self.write_signals: WriteWatch | None = None
        """The store's write signal while ``LocalEngine`` watches it. Taken right before the
        counter read that follows each commit, so the signals of this process's own commit
        wake nothing. Another process's commit that the read after this one holds makes
        this one not quiet, or a claim loop would take the other's for this quiet one: one
        whose signal was pending before this commit, or one that no look or commit has
        seen yet (``WatchableWrites.written_elsewhere``, asked after the read: a commit
        that landed while this one's fsync ran, or before it began with its signal still
        to come)."""
        self._shared = store if isinstance(store, WatchableWrites) else None
        self._commits = 0  # batches committed (or tried), counted once each is done
        self._committing = False  # from a batch's start until ``last_commit`` names it
        self._written_elsewhere = False  # a write signal came before the commit being tried
        # The last counter read: (monotonic time before the read, commits then, counter).
        self._kept_counter: tuple[float, int, int] | None = None
        # The counter that this process's waiters were last woken for, or that its latest
        # commit was read at: a look wakes them when the counter moved from it. Not the
        # last read: a waiter's own read must not hide a commit from the others.
        self._announced: int | None = None

    def change_counter(self, reuse: float) -> int:
        """The store's change counter: the one read at most ``reuse`` seconds ago when no
        batch committed since, or the one from before the batch committing now (on a store
        thread); otherwise read now.

        After each commit the counter is read, and the callbacks that commit resumes
        read it again within microseconds (a claim loop, a Stream reader, the waits).
        A commit of this queue is seen once it is noted in ``last_commit``: read
        between its COMMIT and that note, the counter would be one no commit of this
        process names, and a claim loop would take a quiet commit for another
        process's. A commit of another process is seen up to ``reuse`` later, as if
        it came that much later.
        """
        commits = self._commits
        kept = self._kept_counter
        now = time.monotonic()
        if kept is not None and (
            self._committing or (kept[1] == commits and now - kept[0] < reuse)
        ):
            return kept[2]
        return self._read_counter(now, commits)

    def _others_committed(self) -> bool:
        shared = self._shared
        if shared is None:
            return False
        try:
            return shared.written_elsewhere()
        except Exception:
            return True  # it cannot tell: a claim round too many, rather than one too few

    def note_commit_elsewhere(self) -> None:
        """Another process committed: count it as a loud commit, so a claim loop that wakes for
        it does not skip its round should a quiet commit of this process land first."""
        self.loud_commits += 1

    def counter_moved(self) -> bool | None:
        """At a write signal: whether another process committed since this process's waiters
        were last woken or its latest commit was read. ``None``, with no read, while a
        batch commits on a store thread: a read then could not tell that commit from
        another process's.

        Every commit of this queue is read right after it lands, so a counter that moved
        since then is another process's commit (or another engine's). Asked first, the
        store says whether another connection committed since a commit or look last
        asked: that catches a commit the counter read after one of this process's
        commits holds but that commit did not take for another's.
        """
        if self._committing:
            return None
        elsewhere = self._others_committed()
        counter = self._read_counter(time.monotonic(), self._commits)
        announced, self._announced = self._announced, counter
        return elsewhere or announced is None or counter != announced

    def _read_counter(self, now: float, commits: int) -> int:
        # ``commits`` was taken before the read: a commit that ends during it is not
        # taken as seen by it.
        counter = self._store.change_counter()
        self._kept_counter = (now, commits, counter)
        return counter

    async def run(
        self,
        work: Callable[[StoreTransaction], R],
        durable: bool,
        quiet: Callable[[R], bool] | None = None,
    ) -> tuple[R, int, bool]:
        """Queue ``work``; return its result, the change counter after its commit, and
        whether every work committed with it was quiet. Raises what ``work`` raised."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[BatchOutcome, int, bool]] = loop.create_future()
        with self._lock:
            self._queued.append(_Queued(work, durable, quiet, future, loop))
            start = not self._draining
            self._draining = True
        if start:
            if self.inline is not None:
                # At the loop's next round, so the works its ready callbacks queue join this one.
                loop.call_soon(self._drain_here)
            else:
                loop.run_in_executor(self._executor, self._drain)
        outcome, counter, quiet_batch = await future
        if outcome.error is not None:
            raise outcome.error
        result: R = outcome.value
        return result, counter, quiet_batch

    def _drain_here(self) -> None:
        """Commit the queue on the loop's thread, until it is empty or a batch would wait."""
        while (batch := self._take()) is not None:
            try:
                self._commit_batch(batch, self._commit_now)
            except StoreWouldWaitError:
                with self._lock:
                    self._queued[:0] = batch  # first in line: commits stay in queue order
                self._try_again_or_wait(asyncio.get_running_loop())
                return
            self._retrying_since = None

    def _try_again_or_wait(self, loop: asyncio.AbstractEventLoop) -> None:
        """After a try that would wait: try again on the loop's thread soon, or, once the
        budget is spent, wait in turn on the store thread."""
        now = time.monotonic()
        if self._retrying_since is None:
            self._retrying_since = now
            self._retry_pause = LOOP_RETRY_FIRST_PAUSE
        if now - self._retrying_since < self._retry_budget:
            loop.call_later(self._retry_pause, self._drain_here)
            self._retry_pause = min(self._retry_pause * 2, LOOP_RETRY_LONGEST_PAUSE)
            return
        self._retrying_since = None
        loop.run_in_executor(self._executor, self._commit_in_turn, loop)

    def _commit_in_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the store thread: commit the queue's next batch, waiting for the lock in turn,
        then hand what queued meanwhile back to the loop's thread.

        Not the whole queue: a busy worker's queue is seldom empty, and draining it
        here kept every later commit on this thread.
        """
        batch = self._take()
        if batch is None:
            return
        self._commit_batch(batch, self._commit)
        with self._lock:
            more = bool(self._queued)
            if not more:
                self._draining = False
        if more:
            try:
                loop.call_soon_threadsafe(self._drain_here)
            except RuntimeError:  # the loop closed: nobody waits for these outcomes any more
                with self._lock:
                    self._draining = False

    def _drain(self) -> None:
        """Commit the queue on the store thread until it is empty (a store that cannot try)."""
        while (batch := self._take()) is not None:
            self._commit_batch(batch, self._commit)

    def _take(self) -> list[_Queued[Any]] | None:
        """Every queued work, or ``None`` (and draining stops) when there is none."""
        with self._lock:
            batch, self._queued = self._queued, []
            if not batch:
                self._draining = False
                return None
        return batch

    def _commit_batch(
        self,
        batch: list[_Queued[Any]],
        commit: Callable[[list[_Queued[Any]]], list[BatchOutcome]],
    ) -> None:
        """Commit ``batch`` and settle its callers; ``StoreWouldWaitError`` settles nobody."""
        self._committing = True
        try:
            self._commit_and_settle(batch, commit)
        finally:
            self._committing = False

    def _commit_and_settle(
        self,
        batch: list[_Queued[Any]],
        commit: Callable[[list[_Queued[Any]]], list[BatchOutcome]],
    ) -> None:
        signals = self.write_signals
        # Kept through tries that would wait: the writer they waited for signalled then.
        if signals is not None and signals.drain():
            self._written_elsewhere = True
        try:
            try:
                outcomes = commit(batch)
            finally:
                self._commits += 1
        except StoreWouldWaitError:
            raise
        except Exception as error:  # the whole transaction failed: every caller learns why
            for queued in batch:
                _settle(queued, (BatchOutcome(error=_copy(error)), 0, False))
            return
        except BaseException:
            stopped = RuntimeError("the store stopped before this commit")
            for queued in batch:
                _settle(queued, (BatchOutcome(error=stopped), 0, False))
            with self._lock:
                self._draining = False
            raise
        counter = self._counter_after_commit(signals)
        quiet = counter >= 0 and all(
            queued.quiet is not None and outcome.error is None and queued.quiet(outcome.value)
            for queued, outcome in zip(batch, outcomes, strict=True)
        )
        written_elsewhere, self._written_elsewhere = self._written_elsewhere, False
        if signals is not None:
            # Asked after a loud commit too: what it answers then is seen (the commit wakes
            # every waiter), and a quiet commit after it asks only about what came since.
            others = self._others_committed()
            quiet = quiet and not (written_elsewhere or others)
        self.last_commit = (counter, quiet)
        if not quiet:
            self.loud_commits += 1
        for queued, outcome in zip(batch, outcomes, strict=True):
            _settle(queued, (outcome, counter, quiet))

    def _counter_after_commit(self, signals: WriteWatch | None) -> int:
        """The change counter right after a commit, its own signals taken first; when the
        read fails, a number no counter is (below zero), and nothing kept: the commit
        landed, so its callers get their outcomes, and with a counter no waiter has seen
        and the commit loud, every waiter looks at the store again."""
        try:
            if signals is not None:
                signals.drain()
            counter = self._read_counter(time.monotonic(), self._commits)
        except Exception:
            self._kept_counter = self._announced = None
            return -self._commits
        self._announced = counter
        return counter

    def _commit(self, batch: list[_Queued[Any]]) -> list[BatchOutcome]:
        if len(batch) == 1:
            (queued,) = batch
            try:
                return [BatchOutcome(value=self._store.run(queued.work, durable=queued.durable))]
            except Exception as error:
                return [BatchOutcome(error=error)]
        durable = any(queued.durable for queued in batch)
        return list(self._store.run_batch([queued.work for queued in batch], durable=durable))

    def _commit_now(self, batch: list[_Queued[Any]]) -> list[BatchOutcome]:
        assert self.inline is not None
        durable = any(queued.durable for queued in batch)
        return list(self.inline.try_run_batch([queued.work for queued in batch], durable=durable))


def _copy(error: Exception) -> Exception:
    # One exception object raised in several tasks would chain their tracebacks together.
    try:
        clone = type(error)(*error.args)
    except Exception:
        return error
    clone.__cause__ = error.__cause__
    return clone


def _settle(queued: _Queued[Any], outcome: tuple[BatchOutcome, int, bool]) -> None:
    def settle() -> None:
        if not queued.future.done():
            queued.future.set_result(outcome)

    if _running_loop() is queued.loop:
        settle()  # on the caller's own loop: no wake-up through its self-pipe
        return
    # A closed loop raises RuntimeError: nobody waits for this outcome any more.
    with contextlib.suppress(RuntimeError):
        queued.loop.call_soon_threadsafe(settle)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
