"""The change number each SQLite commit logs (``flow_changes``), taken from what the
connection keeps when no other connection committed since, read otherwise."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.wal_sync import WalSync
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import add_flows, at, flow
from tests.adapters.traced_sql import traced_statements

_NEWEST_READ = "max(change)"


def _append(store: SqliteFlowStore) -> int:
    def work(tx: StoreTransaction) -> int:
        return tx.append_event("Agent", "f1", "{}", "test", at(1))

    return store.run(work)


def _number(path: Path) -> int:
    """The newest change number logged for ``f1``, read on a connection of its own."""
    connection = sqlite3.connect(path)
    try:
        ((number,),) = connection.execute("SELECT change FROM flow_changes WHERE flow_id = 'f1'")
    finally:
        connection.close()
    return int(number)


def test_a_commit_after_the_connection_s_own_takes_the_next_number_unread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    try:
        add_flows(store, flow("f1"))
        _append(store)
        first = _number(path)
        with traced_statements(store) as statements:
            _append(store)
            _append(store)
        assert not [sql for sql in statements if _NEWEST_READ in sql]
        assert _number(path) == first + 2
    finally:
        store.close()


def test_a_commit_after_another_connection_s_takes_the_number_above_it(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    one, other = SqliteFlowStore(path), SqliteFlowStore(path)
    try:
        add_flows(one, flow("f1"))
        seen: list[int] = []
        for store in (one, other, one, one, other, one):
            _append(store)
            seen.append(_number(path))
        # Each commit one above the one before, whichever connection made it: a number
        # kept across another connection's commit would be logged twice.
        assert seen == list(range(seen[0], seen[0] + 6))
    finally:
        one.close()
        other.close()


class _Interrupted(BaseException):
    pass


class _SignalInterrupted(WalSync):
    """A WAL sync whose next signal, right after a COMMIT landed, is interrupted."""

    interrupt = False

    def signal(self) -> None:
        if self.interrupt:
            self.interrupt = False
            raise _Interrupted
        super().signal()


def test_a_commit_interrupted_after_its_commit_landed_leaves_the_next_to_read_the_number(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    wal = store._wal = _SignalInterrupted(path)  # between COMMIT and what follows it
    try:
        add_flows(store, flow("f1"))
        _append(store)
        before = _number(path)
        wal.interrupt = True
        with pytest.raises(_Interrupted):
            _append(store)
        assert _number(path) == before + 1  # it landed
        _append(store)
        assert _number(path) == before + 2
    finally:
        store.close()
