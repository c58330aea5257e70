"""Writers of one SQLite session database take the write lock in turn."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore, StoreBusyError
from dex_agents.ports.flow_store import StoreTransaction, StoreWouldWaitError
from tests.adapters.flow_store_rows import (
    add_flows,
    clients_seen_waiting,
    flow,
    held_flock,
    write_held_open,
)

HOG_HOLDS = 0.02
"""Seconds a hog's transaction holds the write lock: long beside the moment it lets go."""


class Hog:
    """A thread that commits on its own store back to back, each commit holding the lock a while."""

    def __init__(self, path: Path) -> None:
        self.store = SqliteFlowStore(path)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _commit(self, tx: StoreTransaction) -> None:
        count = int(tx.get_value("f1", "hog", "") or "0")
        tx.put_value("f1", "hog", "", str(count + 1))
        self.stop.wait(HOG_HOLDS)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.store.run(self._commit)


@pytest.fixture
def hog(tmp_path: Path) -> Iterator[Hog]:
    path = tmp_path / "flows.sqlite3"
    setup = SqliteFlowStore(path)
    add_flows(setup, flow("f1"))
    setup.run(lambda tx: tx.put_value("f1", "hog", "", "0"))
    setup.close()
    running = Hog(path)
    running.thread.start()
    try:
        yield running
    finally:
        running.stop.set()
        running.thread.join()
        running.store.close()


def hog_commits(tx: StoreTransaction) -> int:
    return int(tx.get_value("f1", "hog", "") or "0")


def test_a_writer_beside_a_stream_of_commits_waits_for_the_one_in_flight(hog: Hog) -> None:
    # Without the turnstile the hog takes the lock again the instant it lets go, and
    # the other writer, pausing on SQLite's schedule, waits out its busy timeout.
    writer = SqliteFlowStore(hog.store.path, busy_timeout=timedelta(seconds=30))
    try:
        while writer.read(hog_commits) < 2:
            pass  # the hog is committing back to back
        passed = []
        for _ in range(5):
            before = writer.read(hog_commits)
            during = writer.run(hog_commits)  # a write transaction: it needs the lock
            passed.append(during - before)
    finally:
        writer.close()
    # The commit in flight when the writer came, and at most one that began between
    # the writer's read and its wait.
    assert max(passed) <= 2, passed


@pytest.mark.parametrize("patience", [timedelta(0), timedelta(milliseconds=30)], ids=str)
def test_a_writer_still_gives_up_at_its_busy_timeout(tmp_path: Path, patience: timedelta) -> None:
    # Not beside the hog thread: in one process the GIL can keep the hog between its
    # commits for as long as the other thread runs, so the lock would seldom be taken.
    path = tmp_path / "flows.sqlite3"
    holder = SqliteFlowStore(path)
    add_flows(holder, flow("f1"))
    impatient = SqliteFlowStore(path, busy_timeout=patience)
    try:
        with write_held_open(holder):
            outcomes = []
            for _ in range(5):
                try:
                    impatient.run(lambda tx: tx.put_value("f1", "late", "", '"no"'))
                except StoreBusyError:
                    outcomes.append("busy")
                else:
                    outcomes.append("ran")
        # The retries end at the busy timeout, with the lock still taken.
        assert outcomes == ["busy"] * 5
        impatient.run(lambda tx: tx.put_value("f1", "late", "", '"yes"'))
    finally:
        impatient.close()
        holder.close()


def test_a_read_waits_with_the_stores_busy_timeout_and_a_begun_write_with_none(
    tmp_path: Path,
) -> None:
    store = SqliteFlowStore(tmp_path / "flows.sqlite3", busy_timeout=timedelta(seconds=7))
    add_flows(store, flow("f1"))
    connection = store._connection  # the store's own: busy_timeout is per connection
    assert connection is not None

    def busy_timeout(tx: StoreTransaction) -> int:
        tx.list_flows()  # a statement: a read served from the kept rows would begin nothing
        return int(connection.execute("PRAGMA busy_timeout").fetchone()[0])

    try:
        for _ in range(2):  # and again after the other kind
            assert store.run(busy_timeout) == 0
            assert store.run(busy_timeout) == 0
            assert store.read(busy_timeout) == 7000
            assert store.read(busy_timeout) == 7000
        assert store.try_run_batch([busy_timeout])[0].value == 0
        assert store.try_read(busy_timeout) == 7000
    finally:
        store.close()


def test_the_turnstile_file_sits_beside_the_database(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    SqliteFlowStore(path).close()
    assert (tmp_path / "flows.sqlite3-writers").is_file()


def test_a_store_that_cannot_make_the_turnstile_file_still_writes(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    (tmp_path / "flows.sqlite3-writers").mkdir()  # in the way: the file cannot be opened
    store = SqliteFlowStore(path)
    try:
        add_flows(store, flow("f1"))
        assert store.run(lambda tx: tx.get_flow("f1")) == flow("f1")
    finally:
        store.close()


WAITING_WRITER = """
import sys
from datetime import timedelta
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore

store = SqliteFlowStore(sys.argv[1], busy_timeout=timedelta(seconds=60))
print("writing", flush=True)
store.run(lambda tx: tx.put_value("f1", "killed", "", '"never"'))
"""


def test_a_writer_killed_while_it_holds_the_turnstile_holds_up_no_one(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    holder = SqliteFlowStore(path)
    add_flows(holder, flow("f1"))
    with write_held_open(holder):
        waiter = subprocess.Popen(
            [sys.executable, "-c", WAITING_WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert waiter.stdout is not None
        try:
            assert waiter.stdout.readline() == "writing\n"
            turnstile = os.open(tmp_path / "flows.sqlite3-writers", os.O_RDWR)
            try:
                # The waiting writer holds the turnstile while the write lock is taken.
                while _free(turnstile):
                    assert waiter.poll() is None
                os.kill(waiter.pid, signal.SIGKILL)
                waiter.wait(timeout=10)
                assert _free(turnstile), "a killed writer's turnstile goes with its process"
            finally:
                os.close(turnstile)
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
            waiter.stdout.close()
    after = SqliteFlowStore(path, busy_timeout=timedelta(0))  # must not wait at all
    try:
        after.run(lambda tx: tx.put_value("f1", "after", "", '"written"'))
        assert after.run(lambda tx: tx.get_value("f1", "killed", "")) is None
    finally:
        after.close()
        holder.close()


def _free(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def test_a_writer_that_cannot_pass_the_turnstile_in_time_never_goes_ahead(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    impatient = SqliteFlowStore(path, busy_timeout=timedelta(0))
    add_flows(impatient, flow("f1"))
    try:
        # As a writer waiting for the lock holds it; the write lock itself is free.
        with held_flock(tmp_path / "flows.sqlite3-writers") as let_go:
            with pytest.raises(StoreBusyError):
                impatient.run(lambda tx: tx.put_value("f1", "ahead", "", '"no"'))
            let_go()
            impatient.run(lambda tx: tx.put_value("f1", "after", "", '"yes"'))
        assert impatient.read(lambda tx: tx.get_value("f1", "ahead", "")) is None
        assert impatient.read(lambda tx: tx.get_value("f1", "after", "")) == '"yes"'
    finally:
        impatient.close()


RANKED_CLIENT = """
import sys
from datetime import timedelta
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
sys.path.insert(0, sys.argv[2])
from tests.adapters.test_writer_turnstile import take_rank
store = SqliteFlowStore(sys.argv[1], busy_timeout=timedelta(seconds=60), client=True)
store.run(take_rank("client"))
store.close()
"""


def take_rank(name: str) -> Callable[[StoreTransaction], None]:
    """A write that notes which writer it was: 1 for the first to commit, then 2, ..."""

    def write(tx: StoreTransaction) -> None:
        rank = int(tx.get_value("f1", "ranks", "") or "0") + 1
        tx.put_value("f1", "ranks", "", str(rank))
        tx.put_value("f1", name, "", str(rank))

    return write


def _flock_holders(path: Path) -> set[int]:
    """The PIDs holding an ``flock`` on ``path`` (``/proc/locks``)."""
    inode = os.stat(path).st_ino
    holders = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1] == "FLOCK" and fields[5].split(":")[-1] == str(inode):
            holders.add(int(fields[4]))
    return holders


def test_a_client_goes_ahead_of_a_worker_waiting_for_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    holder = SqliteFlowStore(path)
    worker = SqliteFlowStore(path, busy_timeout=timedelta(seconds=60))
    add_flows(holder, flow("f1"))
    writers = tmp_path / "flows.sqlite3-writers"
    try:
        with write_held_open(holder):
            waiting = threading.Thread(target=worker.run, args=(take_rank("worker"),))
            waiting.start()
            # The worker's writer holds the turnstile while the write lock is taken.
            give_up = time.monotonic() + 60  # a guard against a hang, not a timing
            while os.getpid() not in _flock_holders(writers):
                assert waiting.is_alive()
                assert time.monotonic() < give_up
            client = subprocess.Popen(
                [sys.executable, "-c", RANKED_CLIENT, str(path), str(Path.cwd())]
            )
            try:
                # The worker lets go of the turnstile for the client, who now waits there.
                while client.pid not in _flock_holders(writers):
                    assert client.poll() is None
                    assert time.monotonic() < give_up, "the worker never let the client go first"
            except BaseException:
                client.kill()
                client.wait()
                raise
        assert client.wait(timeout=60) == 0
        waiting.join()

        def ranks(tx: StoreTransaction) -> tuple[str | None, str | None]:
            return tx.get_value("f1", "client", ""), tx.get_value("f1", "worker", "")

        assert holder.read(ranks) == ("1", "2")
    finally:
        worker.close()
        holder.close()


def test_a_worker_steps_back_for_a_waiting_client_only_for_a_while(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    worker = SqliteFlowStore(path)
    add_flows(worker, flow("f1"))
    try:
        # As a client waiting for the lock holds it, for ever.
        with held_flock(tmp_path / "flows.sqlite3-clients", fcntl.LOCK_SH):
            # A try never waits, so it leaves the write to the store's thread...
            with pytest.raises(StoreWouldWaitError):
                worker.try_run_batch([take_rank("tried")])
            # ...where the worker steps back for at most MOST_YIELD, then writes in turn.
            worker.run(take_rank("worker"))
        assert worker.read(lambda tx: tx.get_value("f1", "worker", "")) == "1"
        assert worker.read(lambda tx: tx.get_value("f1", "tried", "")) is None
    finally:
        worker.close()


def test_a_client_does_not_step_back_for_other_clients(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    client = SqliteFlowStore(path, client=True)
    add_flows(client, flow("f1"))
    try:
        with held_flock(tmp_path / "flows.sqlite3-clients", fcntl.LOCK_SH):
            client.try_run_batch([take_rank("client")])
        assert client.read(lambda tx: tx.get_value("f1", "client", "")) == "1"
    finally:
        client.close()


@contextlib.contextmanager
def _trying_beside_a_writer(
    tmp_path: Path, *, client: bool
) -> Iterator[tuple[SqliteFlowStore, Callable[[], None]]]:
    """A store whose try at a write failed because another connection holds the write lock;
    the body gets it and the function that ends the other connection's write."""
    path = tmp_path / "flows.sqlite3"
    holder = SqliteFlowStore(path)
    store = SqliteFlowStore(path, client=client)
    add_flows(holder, flow("f1"))
    try:
        with contextlib.ExitStack() as held:
            held.enter_context(write_held_open(holder))
            with pytest.raises(StoreWouldWaitError):
                store.try_run_batch([take_rank("tried")])
            yield store, held.close
    finally:
        store.close()
        holder.close()


@pytest.mark.parametrize("client", [True, False])
def test_a_clients_failed_try_leaves_it_seen_waiting_until_a_try_begins(
    tmp_path: Path, client: bool
) -> None:
    # The engine tries a client's write again on its loop; meanwhile the workers must step
    # back for it as for a client blocked in begin. A worker's failed try is no such wait.
    database = tmp_path / "flows.sqlite3"
    with _trying_beside_a_writer(tmp_path, client=client) as (store, end_the_write):
        assert clients_seen_waiting(database) is client
        with pytest.raises(StoreWouldWaitError):
            store.try_run_batch([take_rank("tried")])
        assert clients_seen_waiting(database) is client
        end_the_write()
        store.try_run_batch([take_rank("written")])
        assert not clients_seen_waiting(database)
        assert store.read(lambda tx: tx.get_value("f1", "written", "")) == "1"


def test_a_clients_wait_on_the_store_thread_ends_an_announced_one(tmp_path: Path) -> None:
    database = tmp_path / "flows.sqlite3"
    with _trying_beside_a_writer(tmp_path, client=True) as (store, end_the_write):
        assert clients_seen_waiting(database)
        end_the_write()
        store.run(take_rank("written"))  # begin(): waits as a client, then lets go
        assert not clients_seen_waiting(database)


def test_closing_a_client_store_ends_its_announced_wait(tmp_path: Path) -> None:
    database = tmp_path / "flows.sqlite3"
    with _trying_beside_a_writer(tmp_path, client=True) as (store, end_the_write):
        assert clients_seen_waiting(database)
        end_the_write()
        store.close()
        assert not clients_seen_waiting(database)
