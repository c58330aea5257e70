"""The engine's waiters reuse a change-counter read for the reads that follow it at once
(``GroupCommitQueue.change_counter``), never across a commit of its own.

After each commit the counter is read, and the waiters the commit resumes (a
claim loop, Stream readers' waits) read it again within microseconds. They must
still see every commit of this process at once; another process's commit may be
seen up to the reuse window later, as if it came that much later. A caller that
decides from the counter whether to read now (``LocalEngine.change_counter``)
always reads it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from dex_agents.adapters.local import engine as engine_module
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.group_commit import GroupCommitQueue
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.store_errors import StoreBusyError
from dex_agents.ports.flow_store import StoreTransaction

LONG = 3600.0  # no test lasts that long: only a commit makes the queue read again


class CountedStore(MemoryFlowStore):
    """A memory store that counts its change-counter reads."""

    def __init__(self) -> None:
        super().__init__()
        self.counter_reads = 0

    def change_counter(self) -> int:
        self.counter_reads += 1
        return super().change_counter()


@pytest.fixture
def store() -> CountedStore:
    return CountedStore()


@pytest.fixture
def queue(store: CountedStore) -> Iterator[GroupCommitQueue]:
    with ThreadPoolExecutor(1) as executor:
        yield GroupCommitQueue(store, executor)


def _write(tx: StoreTransaction) -> None:
    tx.put_value("run", "Name", "", str(time.monotonic_ns()))


def test_reads_in_the_window_read_the_store_once(
    store: CountedStore, queue: GroupCommitQueue
) -> None:
    first = queue.change_counter(LONG)
    assert [queue.change_counter(LONG) for _ in range(5)] == [first] * 5
    assert store.counter_reads == 1


def test_a_read_with_no_window_always_reads(store: CountedStore, queue: GroupCommitQueue) -> None:
    queue.change_counter(0)
    queue.change_counter(0)
    assert store.counter_reads == 2


def test_a_read_after_the_window_reads_again(store: CountedStore, queue: GroupCommitQueue) -> None:
    queue.change_counter(0.001)
    time.sleep(0.002)
    queue.change_counter(0.001)
    assert store.counter_reads == 2


async def test_a_commit_of_the_queue_is_seen_by_the_next_read(
    store: CountedStore, queue: GroupCommitQueue
) -> None:
    before = queue.change_counter(LONG)
    _, after_commit, _ = await queue.run(_write, durable=True)
    assert after_commit != before
    assert after_commit == store.change_counter()  # the commit's own read is fresh
    assert queue.change_counter(LONG) == after_commit


async def test_a_commit_that_failed_still_ends_the_reuse(
    store: CountedStore, queue: GroupCommitQueue
) -> None:
    queue.change_counter(LONG)

    def fails(tx: StoreTransaction) -> None:
        raise RuntimeError("the work fails")

    with pytest.raises(RuntimeError, match="the work fails"):
        await queue.run(fails, durable=True)
    reads = store.counter_reads
    queue.change_counter(LONG)
    assert store.counter_reads == reads  # the failed commit's own read stands for it


class FailingCounterStore(CountedStore):
    """A memory store whose next change-counter read fails, as a busy or failing file's may."""

    fail_next = False

    def change_counter(self) -> int:
        if self.fail_next:
            self.fail_next = False
            raise StoreBusyError("the counter's read failed")
        return super().change_counter()


async def test_a_commit_whose_counter_read_fails_still_gives_its_callers_their_outcome() -> None:
    # The commit landed: its caller must not be told it failed (a client would send its
    # message again, a worker lose the Steps the commit leased to it). Every waiter looks
    # at the store again instead: the counter is one none has seen and the commit is loud.
    store = FailingCounterStore()
    with ThreadPoolExecutor(1) as executor:
        queue = GroupCommitQueue(store, executor)
        before = queue.change_counter(LONG)
        loud = queue.loud_commits
        store.fail_next = True
        result, counter, quiet = await queue.run(_write_done, True, _quiet)
        assert (result, quiet) == ("done", False)
        assert counter < 0
        assert counter != before
        assert queue.loud_commits == loud + 1
        reads = store.counter_reads
        assert queue.change_counter(LONG) == store.change_counter()  # read again, not reused
        assert store.counter_reads == reads + 2
        assert store.run(lambda tx: tx.get_value("run", "Name", "")) is not None


def _write_done(tx: StoreTransaction) -> str:
    _write(tx)
    return "done"


def _quiet(_: object) -> bool:
    return True


def test_another_connection_s_commit_is_seen_once_the_window_passes(
    store: CountedStore, queue: GroupCommitQueue
) -> None:
    before = queue.change_counter(0.001)
    store.run(_write)  # another process's commit, as far as the queue knows
    time.sleep(0.002)
    assert queue.change_counter(0.001) != before


class CommitDuringRead(CountedStore):
    """A store during whose first counter read its queue's commit ends (on the store thread)."""

    queue: GroupCommitQueue

    def change_counter(self) -> int:
        counter = super().change_counter()
        if self.counter_reads == 1:
            # A batch ends while this read runs: the number read may be from before it.
            self.queue._commit_batch([], lambda batch: [])
        return counter


def test_a_commit_that_ends_during_a_read_is_not_taken_as_seen() -> None:
    store = CommitDuringRead()
    with ThreadPoolExecutor(1) as executor:
        store.queue = queue = GroupCommitQueue(store, executor)
        queue.change_counter(LONG)
        reads = store.counter_reads
        queue.change_counter(LONG)
        assert store.counter_reads == reads + 1


class ReadDuringCommit(CountedStore):
    """A store that, once its commit is done and before the queue notes it, has the queue's
    counter read, as a claim loop on the event loop does while the store thread commits."""

    queue: GroupCommitQueue

    def __init__(self) -> None:
        super().__init__()
        self.read_during: list[int] = []

    def run(self, work: Any, *, durable: bool = True) -> Any:
        result = super().run(work, durable=durable)
        self.read_during.append(self.queue.change_counter(0))
        return result


async def test_a_read_while_a_batch_commits_gets_the_counter_before_it() -> None:
    # Read after its COMMIT and before last_commit names it, the new counter would be one
    # that no commit of this process names: a claim loop would take this quiet commit
    # for another process's and run a round for nothing.
    store = ReadDuringCommit()
    with ThreadPoolExecutor(1) as executor:
        store.queue = queue = GroupCommitQueue(store, executor)
        before = queue.change_counter(0)
        _, after_commit, _ = await queue.run(_write, durable=True)
        assert store.read_during == [before]
        assert after_commit != before
        assert queue.last_commit[0] == after_commit
        assert queue.change_counter(0) == after_commit


async def test_the_engine_reads_fresh_for_a_decision_and_reuses_for_a_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A window no test outlasts, so a slow machine cannot end it between two reads.
    monkeypatch.setattr(engine_module, "COUNTER_REUSE", timedelta(seconds=LONG))
    store = CountedStore()
    engine = LocalEngine(store, [])
    try:
        fresh = [await engine.change_counter() for _ in range(2)]
        assert store.counter_reads == 2
        assert await engine.recent_change_counter() == fresh[-1]
        assert store.counter_reads == 2  # within the window of the last read
    finally:
        engine.close()
