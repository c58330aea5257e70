"""Store transactions that can begin at once run on the event loop's thread; the others do not.

The loop must never wait for a lock held by another thread or process: such a
transaction goes to the engine's store thread, in queue order, and the loop
goes on meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.group_commit import GroupCommitQueue
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_store import (
    BatchOutcome,
    FlowStore,
    InlineFlowStore,
    StoreTransaction,
    StoreWouldWaitError,
)
from tests.adapters.flow_store_rows import (
    add_flows,
    clients_seen_waiting,
    flow,
    held_flock,
    write_held_open,
)


class TriedSqliteStore(SqliteFlowStore):
    """The SQLite store, noting the size of every batch it was asked to try."""

    def __init__(self, path: Path, *, client: bool = False) -> None:
        super().__init__(path, client=client)
        self.tried: list[int] = []

    def try_run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        self.tried.append(len(works))
        return super().try_run_batch(works, durable=durable)


def _stores(tmp_path: Path) -> dict[str, Callable[[], FlowStore]]:
    return {
        "sqlite": lambda: SqliteFlowStore(tmp_path / "flows.sqlite3"),
        "memory": MemoryFlowStore,
    }


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowStore]:
    made = _stores(tmp_path)[request.param]()
    add_flows(made, flow("f1"))
    try:
        yield made
    finally:
        made.close()


@contextlib.contextmanager
def in_transaction_elsewhere(store: FlowStore) -> Iterator[None]:
    """For the body, another thread of this process is inside a transaction of ``store``."""
    inside, release = threading.Event(), threading.Event()

    def hold(_: StoreTransaction) -> None:
        inside.set()
        release.wait()

    thread = threading.Thread(target=store.read, args=(hold,))
    thread.start()
    try:
        assert inside.wait(10)
        yield
    finally:
        release.set()
        thread.join()


def _writes(name: str, ran_on: list[int]) -> Callable[[StoreTransaction], str]:
    def write(tx: StoreTransaction) -> str:
        ran_on.append(threading.get_ident())
        tx.put_value("f1", name, "", f'"{name}"')
        return name

    return write


def test_both_stores_can_try_without_waiting(store: FlowStore) -> None:
    assert isinstance(store, InlineFlowStore)


def test_a_try_runs_like_the_call_it_stands_for(store: FlowStore) -> None:
    assert isinstance(store, InlineFlowStore)

    def fails(_: StoreTransaction) -> None:
        raise ValueError("no")

    outcomes = store.try_run_batch([_writes("a", []), fails, _writes("b", [])])
    assert [outcome.value for outcome in outcomes] == ["a", None, "b"]
    assert isinstance(outcomes[1].error, ValueError)
    assert store.try_read(lambda tx: tx.get_value("f1", "a", "")) == '"a"'
    assert store.read(lambda tx: tx.get_value("f1", "b", "")) == '"b"'


def test_a_try_while_another_thread_is_in_a_transaction_runs_nothing(store: FlowStore) -> None:
    assert isinstance(store, InlineFlowStore)
    ran: list[int] = []
    with in_transaction_elsewhere(store):
        with pytest.raises(StoreWouldWaitError):
            store.try_run_batch([_writes("a", ran)])
        with pytest.raises(StoreWouldWaitError):
            store.try_read(lambda tx: ran.append(1))
    assert ran == []
    assert store.read(lambda tx: tx.get_value("f1", "a", "")) is None


def test_a_try_whose_work_raises_leaves_the_store_to_other_threads(store: FlowStore) -> None:
    assert isinstance(store, InlineFlowStore)

    def fails(_: StoreTransaction) -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        store.try_read(fails)
    store.try_run_batch([fails])
    # The store's lock went back with each try: another thread's try begins at once.
    with ThreadPoolExecutor(1) as elsewhere:
        read = elsewhere.submit(store.try_read, lambda tx: tx.get_value("f1", "a", ""))
        assert read.result() is None
        written = elsewhere.submit(store.try_run_batch, [_writes("a", [])])
        assert [outcome.value for outcome in written.result()] == ["a"]


def test_a_sqlite_try_while_another_connection_writes_runs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    store, other = SqliteFlowStore(path), SqliteFlowStore(path)
    add_flows(store, flow("f1"))
    ran: list[int] = []
    try:
        with write_held_open(other):
            with pytest.raises(StoreWouldWaitError):
                store.try_run_batch([_writes("a", ran)])
            # A WAL read waits for no writer.
            assert store.try_read(lambda tx: tx.get_value("f1", "a", "")) is None
        assert ran == []
        # A read after the try still waits with the store's patience.
        connection = store._connection
        assert connection is not None
        timeout = store.read(lambda _: connection.execute("PRAGMA busy_timeout").fetchone()[0])
        assert timeout == round(store.busy_timeout.total_seconds() * 1000)
        store.try_run_batch([_writes("a", ran)])
        assert len(ran) == 1
    finally:
        other.close()
        store.close()


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_sqlite_try_while_a_writer_waits_at_the_turnstile_runs_nothing(
    store: FlowStore, tmp_path: Path
) -> None:
    assert isinstance(store, SqliteFlowStore)
    with held_flock(tmp_path / "flows.sqlite3-writers"), pytest.raises(StoreWouldWaitError):
        store.try_run_batch([_writes("ahead", [])])
    assert store.read(lambda tx: tx.get_value("f1", "ahead", "")) is None


async def test_a_free_store_commits_and_reads_on_the_loops_thread(store: FlowStore) -> None:
    engine = LocalEngine(store, [])
    ran_on: list[int] = []
    try:
        assert await engine.run(_writes("a", ran_on)) == "a"
        read = await engine.read(lambda tx: (threading.get_ident(), tx.get_value("f1", "a", "")))
    finally:
        engine.close()
    assert ran_on == [threading.get_ident()]
    assert read == (threading.get_ident(), '"a"')


async def test_works_queued_in_one_round_of_the_loop_commit_as_one_batch(tmp_path: Path) -> None:
    store = TriedSqliteStore(tmp_path / "flows.sqlite3")
    add_flows(store, flow("f1"))
    engine = LocalEngine(store, [])
    try:
        names = await asyncio.gather(*(engine.run(_writes(name, [])) for name in "abc"))
    finally:
        engine.close()
        store.close()
    assert names == ["a", "b", "c"]
    assert store.tried == [3]


async def test_a_commit_that_keeps_waiting_goes_to_the_store_thread_and_the_loop_goes_on(
    tmp_path: Path,
) -> None:
    loop_thread = threading.get_ident()
    ran_on: list[int] = []
    order: list[str] = []
    # No tries on the loop: the first try that would wait spends the budget.
    with _queue_beside_a_writer(tmp_path, budget=0.0) as (_, queue, end_the_write):
        first = asyncio.ensure_future(queue.run(_writes("first", ran_on), True))
        await asyncio.sleep(0.05)  # the loop runs on while the lock is held elsewhere
        assert not first.done()
        # Queued behind the waiting one, it commits after it.
        second = asyncio.ensure_future(queue.run(_writes("second", ran_on), True))
        first.add_done_callback(lambda _: order.append("first"))
        second.add_done_callback(lambda _: order.append("second"))
        await asyncio.sleep(0.05)
        assert not second.done()
        end_the_write()
        done = await asyncio.gather(first, second)
    assert [result for result, _, _ in done] == ["first", "second"]
    assert order == ["first", "second"]
    # The one that waited committed on the store thread, which then handed the queue back:
    # the loop's thread committed the next.
    assert ran_on == [ran_on[0], loop_thread]
    assert ran_on[0] != loop_thread


async def test_a_read_while_another_thread_is_in_a_transaction_waits_off_the_loop(
    store: FlowStore,
) -> None:
    engine = LocalEngine(store, [])
    try:
        with in_transaction_elsewhere(store):
            read = asyncio.ensure_future(engine.read(lambda tx: threading.get_ident()))
            await asyncio.sleep(0.05)
            assert not read.done()
        assert await read != threading.get_ident()
    finally:
        engine.close()


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition never held")


@contextlib.contextmanager
def _queue_beside_a_writer(
    tmp_path: Path, *, budget: float, client: bool = False
) -> Iterator[tuple[TriedSqliteStore, GroupCommitQueue, Callable[[], None]]]:
    """A commit queue of a store whose file another connection is writing to: the body gets
    the store, the queue (``loop_retry_budget=budget``) and the function that ends the write."""
    path = tmp_path / "flows.sqlite3"
    store, other = TriedSqliteStore(path, client=client), SqliteFlowStore(path)
    add_flows(store, flow("f1"))
    try:
        # The write ends before the store thread is joined: a commit may be waiting there.
        with ThreadPoolExecutor(1) as executor, contextlib.ExitStack() as held:
            held.enter_context(write_held_open(other))
            yield store, GroupCommitQueue(store, executor, loop_retry_budget=budget), held.close
    finally:
        other.close()
        store.close()


async def test_a_commit_that_would_wait_briefly_is_tried_again_on_the_loops_thread(
    tmp_path: Path,
) -> None:
    # Waiting on the store thread, the works would run there beside the loop's Steps.
    ran_on: list[int] = []
    with _queue_beside_a_writer(tmp_path, budget=60.0) as (store, queue, end_the_write):
        first = asyncio.ensure_future(queue.run(_writes("first", ran_on), True))
        await _until(lambda: len(store.tried) >= 2)  # tried, and tried again
        # Queued while the first waits, it joins the first's next try.
        second = asyncio.ensure_future(queue.run(_writes("second", ran_on), True))
        await _until(lambda: store.tried[-1] == 2)
        assert not first.done()
        assert not clients_seen_waiting(store.path)
        end_the_write()
        assert (await first)[0] == "first"
        assert (await second)[0] == "second"
    assert ran_on == [threading.get_ident()] * 2
    assert store.tried[-1] == 2


async def test_a_clients_commit_tried_again_on_the_loop_is_seen_waiting_meanwhile(
    tmp_path: Path,
) -> None:
    # So the workers' writers step back for it, as for a client waiting on the store thread.
    ran_on: list[int] = []
    with _queue_beside_a_writer(tmp_path, budget=60.0, client=True) as (
        store,
        queue,
        end_the_write,
    ):
        written = asyncio.ensure_future(queue.run(_writes("first", ran_on), True))
        await _until(lambda: len(store.tried) >= 2)
        assert clients_seen_waiting(store.path)
        end_the_write()
        assert (await written)[0] == "first"
        assert not clients_seen_waiting(store.path)
    assert ran_on == [threading.get_ident()]
