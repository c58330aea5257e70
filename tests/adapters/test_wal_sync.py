"""A durable commit of the SQLite store is synced after ``COMMIT`` let the write lock go.

The sync is watched where the store calls the operating system: what a test can
see of an fsync is which file it named and what other connections could do
while it ran; whether the disk kept the data only a power failure shows.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dex_agents.adapters.local import wal_sync
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.store_errors import StoreNotDurableError
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import add_flows, flow


@dataclass
class SeenSync:
    """One sync, with what another connection could do while it ran."""

    path: str
    lock_free: bool
    value_seen: str | None


@dataclass
class Syncs:
    """Every sync the store asked for; ``failing`` makes the next ones raise EIO."""

    database: Path
    seen: list[SeenSync] = field(default_factory=list)
    failing: bool = False

    def __call__(self, fd: int) -> None:
        other = sqlite3.connect(self.database, timeout=0, isolation_level=None)
        try:
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
                lock_free = True
            except sqlite3.OperationalError:
                lock_free = False
            row = other.execute(
                "SELECT value FROM attribute_values WHERE flow_id = 'f1' AND name = 'n'"
            ).fetchone()
        finally:
            other.close()
        self.seen.append(SeenSync(os.readlink(f"/proc/self/fd/{fd}"), lock_free, row and row[0]))
        if self.failing:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "flows.sqlite3"


@pytest.fixture
def syncs(database: Path, monkeypatch: pytest.MonkeyPatch) -> Syncs:
    watched = Syncs(database)
    monkeypatch.setattr(wal_sync, "_sync_data", watched)
    return watched


@pytest.fixture
def store(database: Path, syncs: Syncs) -> Iterator[SqliteFlowStore]:
    opened = SqliteFlowStore(database)
    add_flows(opened, flow("f1"))
    syncs.seen.clear()  # the new file's schema and the flow row were synced too
    yield opened
    opened.close()


def _put(value: str) -> Callable[[StoreTransaction], None]:
    return lambda tx: tx.put_value("f1", "n", "", value)


def test_a_durable_commit_is_synced_once_others_can_write_and_read_it(
    store: SqliteFlowStore, syncs: Syncs, database: Path
) -> None:
    store.run(_put("42"))
    assert syncs.seen == [SeenSync(f"{database}-wal", lock_free=True, value_seen="42")]


def test_a_new_store_syncs_its_schema(database: Path, syncs: Syncs) -> None:
    SqliteFlowStore(database).close()
    assert [seen.path for seen in syncs.seen] == [f"{database}-wal"] * 2  # tables, then indexes
    syncs.seen.clear()
    SqliteFlowStore(database).close()  # opening a store that exists writes nothing
    assert syncs.seen == []


def test_a_soft_commit_and_a_commit_that_changed_nothing_sync_nothing(
    store: SqliteFlowStore, syncs: Syncs
) -> None:
    store.run(_put("soft"), durable=False)
    assert store.run(lambda tx: tx.get_value("f1", "n", "")) == "soft"
    store.run_batch([lambda tx: tx.get_flow("f1"), lambda tx: tx.get_value("f1", "n", "")])
    assert syncs.seen == []
    store.run(_put("hard"))
    assert [seen.value_seen for seen in syncs.seen] == ["hard"]


def test_a_failed_sync_refuses_every_later_transaction(
    store: SqliteFlowStore, syncs: Syncs, database: Path
) -> None:
    syncs.failing = True
    with pytest.raises(StoreNotDurableError) as raised:
        store.run(_put("written"))
    message = str(raised.value)
    assert f"a commit to {database} was written but syncing {database}-wal failed" in message
    assert os.strerror(errno.EIO) in message
    assert "restart the process" in message
    syncs.failing = False
    # Others read the commit, but nothing here can tell whether the disk kept it.
    assert syncs.seen[-1].value_seen == "written"
    attempts: list[Callable[[], object]] = [
        lambda: store.run(_put("later")),
        lambda: store.read(lambda tx: tx.get_value("f1", "n", "")),
        lambda: store.run(_put("later"), durable=False),
    ]
    for attempt in attempts:
        with pytest.raises(StoreNotDurableError, match="restart the process"):
            attempt()
    assert len(syncs.seen) == 1
    store.close()
    reopened = SqliteFlowStore(database)
    try:
        assert reopened.read(lambda tx: tx.get_value("f1", "n", "")) == "written"
        reopened.run(_put("after"))
        assert syncs.seen[-1].value_seen == "after"
    finally:
        reopened.close()


def test_a_signal_that_cannot_reach_the_wal_file_loses_nothing(tmp_path: Path) -> None:
    # Best effort: the watchers' polls still see the commit. No -wal file here to open.
    sync = wal_sync.WalSync(tmp_path / "missing.sqlite3")
    try:
        sync.signal()
        sync.check()
    finally:
        sync.close()
