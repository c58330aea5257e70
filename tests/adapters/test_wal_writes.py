"""The write signal of a SQLite store's ``-wal`` file (``wal_writes.py``), and what the engine does with it.

Two stores of one file stand for two processes: each has its own connections,
and the engine of one learns of the other's commits only from the file. Every
engine here polls once an hour, so only the signal can make it see such a commit
within a test.
"""

from __future__ import annotations

import asyncio
import os
import select
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local import write_looks
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.group_commit import GroupCommitQueue
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.sync_client import SyncLocalFlowClient
from dex_agents.adapters.local.wake_up import WakeUp
from dex_agents.adapters.local.wal_writes import WalWrites
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction, StoreWouldWaitError
from tests.adapters.engine_flows import EngineTestFlow, running_worker

NEVER = timedelta(hours=1)
IN_ATTRIB = 0x4  # <sys/inotify.h>


def _readable(watch: WalWrites) -> bool:
    return bool(select.select([watch], [], [], 0)[0])


def _write(tx: StoreTransaction) -> None:
    tx.put_value("run", "Name", "", "value")


class RecordingStore(SqliteFlowStore):
    """A SQLite store that keeps the write watch it gave out."""

    watch: WalWrites | None = None

    def watch_writes(self) -> WalWrites | None:
        self.watch = super().watch_writes()
        return self.watch


class PendingSignals:
    """A write watch whose next drains find a write pending, as many times as asked."""

    def __init__(self) -> None:
        self.pending = 0

    def fileno(self) -> int:
        return -1

    def drain(self) -> bool:
        found, self.pending = self.pending > 0, max(self.pending - 1, 0)
        return found

    def close(self) -> None:
        pass


class SharedMemoryStore(MemoryFlowStore):
    """A memory store that says, as told, that another process committed during a commit, and
    whose next tries would wait, as many as told."""

    def __init__(self) -> None:
        super().__init__()
        self.elsewhere = False
        self.tries_that_wait = 0

    def watch_writes(self) -> PendingSignals:
        return PendingSignals()

    def written_elsewhere(self) -> bool:
        return self.elsewhere

    def try_run_batch(
        self, works: Sequence[Any], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        if self.tries_that_wait:
            self.tries_that_wait -= 1
            raise StoreWouldWaitError("another writer holds the lock")
        return super().try_run_batch(works, durable=durable)


def _quiet(_: object) -> bool:
    return True


@pytest.mark.parametrize(
    ("pending_before", "elsewhere_during", "tries_that_wait", "quiet"),
    [
        (0, False, 0, True),  # nothing but this commit: it stays quiet
        (1, False, 0, False),  # another process wrote before it, unseen yet
        (0, True, 0, False),  # another process committed after it began
        (1, False, 1, False),  # the signal came before a try that would wait
        (1, False, 3, False),
    ],
)
async def test_a_commit_that_another_process_s_commit_may_hide_behind_is_not_quiet(
    pending_before: int, elsewhere_during: bool, tries_that_wait: int, quiet: bool
) -> None:
    store = SharedMemoryStore()
    signals = PendingSignals()
    with ThreadPoolExecutor(1) as executor:
        queue = GroupCommitQueue(store, executor)
        queue.write_signals = signals
        signals.pending = pending_before
        store.elsewhere = elsewhere_during
        store.tries_that_wait = tries_that_wait
        loud = queue.loud_commits
        _, counter, all_quiet = await queue.run(_write, True, _quiet)
        assert all_quiet is quiet
        assert queue.last_commit == (counter, quiet)
        assert queue.loud_commits == loud + (not quiet)
        # What made one loud is used up: the next commit is quiet again.
        store.elsewhere = False
        assert (await queue.run(_write, True, _quiet))[2] is True


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "flows.sqlite3"


@pytest.fixture
def other(path: Path) -> Iterator[SqliteFlowStore]:
    """A second store of the file: another process's connections."""
    store = SqliteFlowStore(path)
    yield store
    store.close()


def test_a_commit_of_another_connection_makes_the_watch_readable_until_drained(
    path: Path, other: SqliteFlowStore
) -> None:
    watch = WalWrites.open(path)
    assert watch is not None
    try:
        assert not _readable(watch)
        other.run(_write)
        assert _readable(watch)
        watch.drain()
        assert not _readable(watch)
        other.read(lambda tx: tx.get_value("run", "Name", ""))
        assert not _readable(watch)  # a read writes nothing
    finally:
        watch.close()
    watch.close()  # a second close does nothing
    watch.drain()  # nor does a drain once closed


def test_the_store_tells_whether_another_connection_committed_since_it_was_last_asked(
    path: Path, other: SqliteFlowStore
) -> None:
    store = SqliteFlowStore(path)
    try:
        assert store.written_elsewhere()  # never asked: it cannot tell
        store.run(_write)
        assert not store.written_elsewhere()  # its own commit does not count
        other.run(_write)
        assert store.written_elsewhere()
        assert not store.written_elsewhere()  # told once
        # Another connection's commit before this store's next transaction began counts
        # too: its signal may still be to come when this store's commit is read.
        other.run(_write)
        store.run(_write)
        assert store.written_elsewhere()
        store.run(_write)
        assert not store.written_elsewhere()
    finally:
        store.close()


def test_a_file_with_no_write_ahead_log_gives_no_watch(tmp_path: Path) -> None:
    plain = tmp_path / "plain.sqlite3"
    sqlite3.connect(plain).close()
    assert WalWrites.open(plain) is None


async def test_another_connection_s_commit_ends_a_change_wait_and_this_engine_s_leaves_no_signal(
    path: Path, other: SqliteFlowStore
) -> None:
    store = RecordingStore(path)
    engine = LocalEngine(store, [], poll_interval=NEVER)
    try:
        since = await engine.change_counter()
        waiting = asyncio.create_task(engine.wait_for_change(since, NEVER))
        await asyncio.sleep(0)  # the wait began and watches the file
        assert store.watch is not None
        await engine.run(_write)
        # This engine's commit was read right after it landed, and its signal taken then.
        assert not _readable(store.watch)
        since = await waiting
        waiting = asyncio.create_task(engine.wait_for_change(since, NEVER))
        await asyncio.sleep(0)
        loud = engine.loud_commits
        other.run(_write)
        async with asyncio.timeout(20):
            assert await waiting != since
        # Counted as a loud commit: a claim loop woken for it never takes it for a quiet one.
        assert engine.loud_commits == loud + 1
    finally:
        engine.close()
        store.close()
    assert store.watch.fileno() == -1  # closed with the engine


def _event_masks(raw: bytes) -> list[int]:
    """The masks of the inotify events in ``raw``, in order (struct inotify_event each)."""
    masks, position = [], 0
    while position < len(raw):
        _, mask, _, name_length = struct.unpack_from("iIII", raw, position)
        masks.append(mask)
        position += 16 + name_length
    return masks


def test_a_commit_signals_its_watchers_once_it_is_visible_and_its_page_writes_do_not(
    path: Path, other: SqliteFlowStore
) -> None:
    # A commit writes its pages before it is visible, and a look then would find nothing:
    # the watch hears only the store's signal, which sets the file's times once it is.
    other.run(_write)  # the WAL file is there to watch
    watch = WalWrites.open(path)
    assert watch is not None
    try:
        other.run(_write)
        assert _event_masks(os.read(watch.fileno(), 65536)) == [IN_ATTRIB]
        other.read(lambda tx: tx.get_value("run", "Name", ""))
        other.run(lambda tx: tx.get_value("run", "Name", ""))  # a write that changed nothing
        assert not _readable(watch)
    finally:
        watch.close()


def test_a_writer_that_does_not_signal_is_left_to_the_polls(
    path: Path, other: SqliteFlowStore
) -> None:
    other.run(_write)  # the WAL file is there to watch
    plain = sqlite3.connect(path, isolation_level=None)
    # Opened before the watch: SQLite running as root gives the -wal file its database's
    # owner as it opens it, which sets its times too.
    plain.execute("SELECT count(*) FROM sqlite_master").fetchall()
    watch = WalWrites.open(path)
    assert watch is not None
    try:
        plain.execute("CREATE TABLE unsignalled (x)")
        plain.execute("INSERT INTO unsignalled VALUES (1)")  # WAL page writes, no signal
        assert not _readable(watch)
    finally:
        watch.close()
        plain.close()


@pytest.fixture
def watching(path: Path, other: SqliteFlowStore) -> Iterator[LocalEngine]:
    """An engine of the file, with a store of its own, that never polls: only the signal
    shows it the other store's commits."""
    other.run(_write)  # the WAL file is there to watch
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [], poll_interval=NEVER)
    yield engine
    engine.close()
    store.close()


async def test_a_signal_whose_look_finds_nothing_is_not_looked_at_again(
    path: Path, other: SqliteFlowStore, watching: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A signal comes once its commit is visible: a look that finds the counter unmoved
    # (this process read that commit already) has nothing left to find later. The next
    # commit's signal is looked at as it comes.
    looks = 0
    counter_moved = GroupCommitQueue.counter_moved

    def counted(queue: GroupCommitQueue) -> bool | None:
        nonlocal looks
        looks += 1
        return counter_moved(queue)

    monkeypatch.setattr(GroupCommitQueue, "counter_moved", counted)
    since = await watching.change_counter()
    waiting = asyncio.create_task(watching.wait_for_change(since, NEVER))  # arms the watch
    await asyncio.sleep(0)
    os.utime(path.with_name(path.name + "-wal"))  # a signal with no commit behind it
    await asyncio.sleep(20 * write_looks.WRITE_RECHECK.total_seconds())
    assert looks == 1
    assert not waiting.done()
    other.run(_write)
    async with asyncio.timeout(20):
        assert await waiting != since
    assert looks == 2


@pytest.mark.parametrize("waiter", ["worker", "reader"])
async def test_a_counter_read_of_this_process_hides_no_commit_of_another_from_the_waiters(
    other: SqliteFlowStore, watching: LocalEngine, waiter: str
) -> None:
    # Between another process's commit and the look at its signal, something else of
    # this process reads the counter (a Stream reader's mark, a claim loop's top): the
    # look must still wake the waiters, which that read woke none of.
    since = await watching.change_counter()
    waiting: asyncio.Task[Any] = asyncio.create_task(
        watching.wait_for_work(since, NEVER, WakeUp())
        if waiter == "worker"
        else watching.wait_for_change(since, NEVER)
    )
    await asyncio.sleep(0)  # the wait began and watches the file
    other.run(_write)
    await watching.flow_change_mark()  # reads the counter now, before the look
    async with asyncio.timeout(20):
        await waiting


async def test_a_quiet_commit_after_another_process_s_commit_whose_signal_is_to_come_is_loud(
    path: Path, watching: LocalEngine
) -> None:
    # Another process's commit lands, and this process commits quietly before that
    # commit's signal comes (the other was preempted between its COMMIT and its signal).
    # The counter read after the quiet commit holds the other's: were it taken as quiet,
    # the signal's look would find the counter unmoved, and a waiting claim loop would
    # sleep until its poll.
    plain = sqlite3.connect(path, isolation_level=None)
    try:
        # Opened before the watch: SQLite running as root gives the -wal file its
        # database's owner as it opens it, which sets its times too.
        plain.execute("SELECT count(*) FROM sqlite_master").fetchall()
        since = await watching.change_counter()
        work = asyncio.create_task(watching.wait_for_work(since, NEVER, WakeUp()))
        await asyncio.sleep(0)  # the wait began and watches the file
        await watching.run_quietly(_write, quiet=_quiet)  # asked once: what comes next is new
        plain.execute("CREATE TABLE unsignalled (x)")  # committed, not signalled yet
        loud = watching.loud_commits
        await watching.run_quietly(_write, quiet=_quiet)
        assert watching.loud_commits == loud + 1
        os.utime(path.with_name(path.name + "-wal"))  # the other's signal, late
        async with asyncio.timeout(20):
            await work
    finally:
        plain.close()


async def test_a_look_that_cannot_tell_looks_again_until_it_can(
    other: SqliteFlowStore, watching: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While this process commits on a store thread a counter read cannot tell that commit
    # from another process's (``counter_moved`` gives None): the look is made again later,
    # or the other process's commit would wait for the next poll.
    answers: list[bool | None] = [None, None]
    counter_moved = GroupCommitQueue.counter_moved

    def busy_at_first(queue: GroupCommitQueue) -> bool | None:
        return answers.pop(0) if answers else counter_moved(queue)

    monkeypatch.setattr(GroupCommitQueue, "counter_moved", busy_at_first)
    since = await watching.change_counter()
    waiting = asyncio.create_task(watching.wait_for_change(since, NEVER))  # arms the watch
    await asyncio.sleep(0)
    other.run(_write)
    async with asyncio.timeout(20):
        assert await waiting != since
    assert not answers  # looked at three times: twice unable to tell, then the commit


async def test_commits_within_the_spacing_wake_the_readers_each_time_and_the_workers_once(
    other: SqliteFlowStore, watching: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader (a client following its session) sees each commit as it lands; the claim
    # loops are woken once per spacing, however many commits came in it.
    monkeypatch.setattr(write_looks, "WORKER_WAKE_SPACING", NEVER)
    since = await watching.change_counter()
    first_work = asyncio.create_task(watching.wait_for_work(since, NEVER, WakeUp()))
    await asyncio.sleep(0)
    other.run(_write)
    async with asyncio.timeout(20):
        await first_work  # the first commit in a while wakes the workers at once
    since = await watching.change_counter()
    work = asyncio.create_task(watching.wait_for_work(since, NEVER, WakeUp()))
    change = asyncio.create_task(watching.wait_for_change(since, NEVER))
    await asyncio.sleep(0)
    other.run(_write)
    async with asyncio.timeout(20):
        assert await change != since  # the reader, at once
    await asyncio.sleep(0.05)
    assert not work.done()  # the workers, not before the spacing has passed
    work.cancel()


Engines = tuple[EngineTestFlow, LocalEngine, EngineTestFlow, LocalEngine]


@pytest.fixture
def engines(path: Path) -> Iterator[Engines]:
    """Engines A and B on one file, each with a store of its own: two processes."""
    flow_a, flow_b = EngineTestFlow(), EngineTestFlow()
    store_a, store_b = SqliteFlowStore(path), SqliteFlowStore(path)
    a = LocalEngine(store_a, [flow_a], poll_interval=NEVER, lease_duration=2 * NEVER)
    b = LocalEngine(store_b, [flow_b], poll_interval=NEVER, lease_duration=2 * NEVER)
    yield flow_a, a, flow_b, b
    for engine in (a, b):
        engine.close()
    for store in (store_a, store_b):
        store.close()


async def test_another_engine_s_new_flow_run_reaches_a_waiting_worker_at_once(
    engines: Engines,
) -> None:
    # Engine B's worker waits between rounds; engine A (a client process) starts a run.
    flow_a, a, flow_b, b = engines
    async with running_worker(b):
        # A run started by B's own client is handed to its worker, which then waits.
        await LocalFlowClient(b).start_flow(flow_b, "warm", "warm")
        await _started(b, "warm")
        await LocalFlowClient(a).start_flow(flow_a, "x", "x")
        await _started(b, "x")


async def test_a_stream_reader_sees_another_engine_s_event_at_once(engines: Engines) -> None:
    flow_a, a, flow_b, b = engines
    # Started with no worker yet: the run has no event when B's reader begins.
    await LocalFlowClient(a).start_flow(flow_a, "y", "y")
    reading = asyncio.create_task(
        LocalFlowClient(b).read_stream(flow_b, "y", poll_timeout=timedelta(seconds=20))
    )
    await asyncio.sleep(0.05)
    assert not reading.done()
    async with running_worker(a):
        message = await reading
    assert message.value == "started y"


async def test_a_blocking_client_s_rpc_reaches_the_engine_s_waiting_worker_at_once(
    path: Path,
) -> None:
    # SyncLocalFlowClient commits through the engine's store from another thread, not
    # through the engine: only the signal of its write tells the worker.
    flow = EngineTestFlow()
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [flow], poll_interval=NEVER, lease_duration=2 * NEVER)
    try:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "s", "s")
            await _started(engine, "s")
            blocking = SyncLocalFlowClient(engine)
            assert await asyncio.to_thread(blocking.invoke_rpc, flow, "s", "send", "hello")
            while "message:hello" not in await LocalFlowClient(engine).invoke_rpc(  # noqa: ASYNC110
                flow, "s", "read_log", None
            ):
                await asyncio.sleep(0.01)
    finally:
        engine.close()
        store.close()


async def _started(engine: LocalEngine, flow_id: str) -> None:
    """Wait until ``flow_id``'s first Step completed."""

    def start_done(tx: StoreTransaction) -> bool:
        return any(
            row.step_type == "Start" and row.status is ExecutionStatus.COMPLETED
            for row in tx.flow_executions(flow_id)
        )

    while not await engine.read(start_done):  # noqa: ASYNC110
        await asyncio.sleep(0.01)
