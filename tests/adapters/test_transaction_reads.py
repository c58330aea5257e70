"""A SQLite store transaction reads a Channel or a lock once until it writes that table.

One commit checks the same wait and the same locks several times (a claim, then
the snapshot of what it claimed); the answers must still follow every write the
transaction makes, and every savepoint it undoes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import at
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteFlowStore]:
    with sqlite_store_with_a_flow(tmp_path) as store:
        yield store


def _selects(statements: list[str], table: str) -> int:
    return sum(1 for sql in statements if sql.lstrip().startswith("SELECT") and table in sql)


def test_pending_messages_are_read_once_and_follow_the_transactions_writes(
    store: SqliteFlowStore,
) -> None:
    def work(tx: StoreTransaction) -> list[list[str]]:
        seen = []
        first = tx.append_message("f1", "inbox", "", "m1", '"a"', at(1))
        for _ in range(2):
            seen.append([row.message_id for row in tx.pending_messages("f1", "inbox", "")])
        tx.consume_messages([first])
        seen.append([row.message_id for row in tx.pending_messages("f1", "inbox", "")])
        tx.restore_messages([first])
        tx.append_message("f1", "inbox", "", "m2", '"b"', at(2))
        seen.append([row.message_id for row in tx.pending_messages("f1", "inbox", "")])
        tx.delete_message("f1", "m2")
        seen.append([row.message_id for row in tx.pending_messages("f1", "inbox", "")])
        return seen

    with traced_statements(store) as statements:
        seen = store.run(work)
    assert seen == [["m1"], ["m1"], [], ["m1", "m2"], ["m1"]]
    assert _selects(statements, "channel_messages") == 4  # the repeated read ran no query


def test_pending_counts_are_read_once_until_a_message_comes(store: SqliteFlowStore) -> None:
    def work(tx: StoreTransaction) -> list[dict[str, int]]:
        counts = [tx.pending_counts("f1", ["a", "b"]) for _ in range(2)]
        counts[1]["a"] = 99  # each caller gets its own copy
        tx.append_message("f1", "a", "", "m1", '"x"', at(1))
        counts.append(tx.pending_counts("f1", ["a", "b"]))
        counts.append(tx.pending_counts("f1", ["a", "b"]))
        return counts

    with traced_statements(store) as statements:
        counts = store.run(work)
    assert counts == [{}, {"a": 99}, {"a": 1}, {"a": 1}]
    assert _selects(statements, "channel_messages") == 2


def test_a_lock_is_read_once_and_its_holder_follows_acquire_and_release(
    store: SqliteFlowStore,
) -> None:
    def work(tx: StoreTransaction) -> list[int | None]:
        holders = [tx.lock_holder("f1", "L"), tx.lock_holder("f1", "L")]
        tx.acquire_lock("f1", "L", 7)  # its check of the holder runs no query either
        holders.append(tx.lock_holder("f1", "L"))
        tx.release_locks(7)
        holders.append(tx.lock_holder("f1", "L"))
        return holders

    with traced_statements(store) as statements:
        holders = store.run(work)
    assert holders == [None, None, 7, None]
    assert _selects(statements, "FROM locks") == 1
    assert store.read(lambda tx: tx.lock_holder("f1", "L")) is None


def test_a_work_undone_by_its_savepoint_leaves_no_remembered_lock_or_message(
    store: SqliteFlowStore,
) -> None:
    def held_then_failed(tx: StoreTransaction) -> None:
        assert tx.lock_holder("f1", "L") is None
        assert tx.pending_messages("f1", "inbox", "") == []
        tx.acquire_lock("f1", "L", 7)
        tx.append_message("f1", "inbox", "", "m1", '"a"', at(1))
        assert tx.pending_counts("f1", ["inbox"]) == {"inbox": 1}
        raise RuntimeError("this work fails, and its savepoint is rolled back")

    def after(tx: StoreTransaction) -> tuple[int | None, int, dict[str, int]]:
        pending = tx.pending_messages("f1", "inbox", "")
        return tx.lock_holder("f1", "L"), len(pending), tx.pending_counts("f1", ["inbox"])

    failed, later = store.run_batch([held_then_failed, after])
    assert isinstance(failed.error, RuntimeError)
    assert later.value == (None, 0, {})
