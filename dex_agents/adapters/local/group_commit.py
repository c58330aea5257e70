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
tried without waiting for any lock (``try_run_batch``); a batch that would wait
goes to the store thread, which then drains the queue until it is empty, and
the loop's thread takes over again after it. A store that cannot try commits
on the store thread only.
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

R = TypeVar("R")


@dataclass
class _Queued(Generic[R]):
    work: Callable[[StoreTransaction], R]
    durable: bool
    quiet: Callable[[R], bool] | None
    future: asyncio.Future[tuple[BatchOutcome, int, bool]]
    loop: asyncio.AbstractEventLoop


class GroupCommitQueue:
    """Write transactions of one process, committed in groups on the store's thread."""

    def __init__(self, store: FlowStore, executor: Executor) -> None:
        self._store = store
        # Checked once: a runtime Protocol check looks up every method.
        self.inline = store if isinstance(store, InlineFlowStore) else None
        """The store, when it can try transactions on the loop's thread; else ``None``."""
        self._executor = executor
        self._lock = threading.Lock()
        self._queued: list[_Queued[Any]] = []
        self._draining = False
        # Noted as each batch commits, before any caller resumes: which task the loop runs
        # first then cannot make a claim loop take a quiet commit for a loud one.
        self.last_commit: tuple[int | None, bool] = (None, False)
        """The change counter after the latest commit, and whether that commit was quiet."""
        self.loud_commits = 0
        """How many commits were not quiet."""
        self._commits = 0  # batches committed (or tried), counted once each is done
        # The last counter read: (monotonic time before the read, commits then, counter).
        self._kept_counter: tuple[float, int, int] | None = None

    def change_counter(self, reuse: float) -> int:
        """The store's change counter: the one read at most ``reuse`` seconds ago when no
        batch committed since, otherwise read now.

        After each commit the counter is read, and the callbacks that commit resumes
        read it again within microseconds (a claim loop, a Stream reader, the waits).
        A commit of this queue always gets a fresh read; a commit of another
        process is seen up to ``reuse`` later, as if it came that much later.
        """
        commits = self._commits
        kept = self._kept_counter
        now = time.monotonic()
        if kept is not None and kept[1] == commits and now - kept[0] < reuse:
            return kept[2]
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
                asyncio.get_running_loop().run_in_executor(self._executor, self._drain)
                return

    def _drain(self) -> None:
        """Commit the queue on the store thread until it is empty."""
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
        try:
            try:
                outcomes = commit(batch)
            finally:
                self._commits += 1
            counter = self.change_counter(0)
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
        quiet = all(
            queued.quiet is not None and outcome.error is None and queued.quiet(outcome.value)
            for queued, outcome in zip(batch, outcomes, strict=True)
        )
        self.last_commit = (counter, quiet)
        if not quiet:
            self.loud_commits += 1
        for queued, outcome in zip(batch, outcomes, strict=True):
            _settle(queued, (outcome, counter, quiet))

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
