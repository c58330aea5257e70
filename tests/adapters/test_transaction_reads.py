"""A SQLite store reads a Channel once while its connection alone writes it, and a lock once
per transaction.

One commit checks the same wait and the same locks several times (a claim, then
the snapshot of what it claimed), and the next commit checks the same Channels
again. The answers must still follow every write the connection makes, every
savepoint it undoes, and every commit of another connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents.adapters.local import known_rows
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import MessageRow
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
    # Read after the first append and after the restore (which puts m1 back in its old
    # place); the consume and the delete are followed without a read.
    assert _selects(statements, "channel_messages") == 2
    with traced_statements(store) as statements:
        assert [row.message_id for row in store.read(_inbox)] == ["m1"]
    assert _selects(statements, "channel_messages") == 0  # the next transaction reads none


def _inbox(tx: StoreTransaction) -> list[MessageRow]:
    return list(tx.pending_messages("f1", "inbox", ""))


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
    assert _selects(statements, "channel_messages") == 1  # the append counted itself in
    with traced_statements(store) as statements:
        assert store.read(lambda tx: tx.pending_counts("f1", ["b", "a"])) == {"a": 1}
        assert store.read(lambda tx: tx.pending_counts("f1", ["a", "c"])) == {"a": 1}
    assert _selects(statements, "channel_messages") == 1  # only "c" was not known


def test_counts_follow_the_messages_read_consumed_and_deleted(store: SqliteFlowStore) -> None:
    def fill(tx: StoreTransaction) -> list[int]:
        return [tx.append_message("f1", "a", "", f"m{n}", '"x"', at(n)) for n in range(3)]

    seqs = store.run(fill)
    assert [row.message_id for row in store.read(_messages_of_a)] == ["m0", "m1", "m2"]

    def take(tx: StoreTransaction) -> dict[str, int]:
        tx.consume_messages([seqs[0], seqs[0]])  # consuming twice takes it once
        assert tx.delete_message("f1", "m2")
        assert not tx.delete_message("f1", "m2")
        return tx.pending_counts("f1", ["a"])

    with traced_statements(store) as statements:
        assert store.run(take) == {"a": 1}
        assert [row.message_id for row in store.read(_messages_of_a)] == ["m1"]
    assert _selects(statements, "channel_messages") == 0
    store.run(lambda tx: tx.restore_messages([seqs[0]]))
    assert [row.message_id for row in store.read(_messages_of_a)] == ["m0", "m1"]
    assert store.read(lambda tx: tx.pending_counts("f1", ["a"])) == {"a": 2}


def _messages_of_a(tx: StoreTransaction) -> list[MessageRow]:
    return list(tx.pending_messages("f1", "a", ""))


@pytest.mark.parametrize("change", ["append", "consume", "restore", "delete"])
def test_another_connection_s_channel_write_is_seen_at_the_next_transaction(
    tmp_path: Path, change: str
) -> None:
    with sqlite_store_with_a_flow(tmp_path) as first:
        second = SqliteFlowStore(first.path)
        try:
            seqs = first.run(
                lambda tx: [
                    tx.append_message("f1", "a", "", "m0", '"x"', at(0)),
                    tx.append_message("f1", "a", "", "m1", '"y"', at(1)),
                ]
            )
            first.run(lambda tx: tx.consume_messages([seqs[1]]))

            def kept(tx: StoreTransaction) -> tuple[list[str], dict[str, int]]:
                ids = [row.message_id for row in tx.pending_messages("f1", "a", "")]
                return ids, tx.pending_counts("f1", ["a"])

            assert first.read(kept) == (["m0"], {"a": 1})  # the first connection keeps these
            writes = {
                "append": lambda tx: tx.append_message("f1", "a", "", "m2", '"z"', at(2)),
                "consume": lambda tx: tx.consume_messages([seqs[0]]),
                "restore": lambda tx: tx.restore_messages([seqs[1]]),
                "delete": lambda tx: tx.delete_message("f1", "m0"),
            }
            second.run(writes[change])
            expected = {
                "append": (["m0", "m2"], {"a": 2}),
                "consume": ([], {}),
                "restore": (["m0", "m1"], {"a": 2}),
                "delete": ([], {}),
            }
            assert first.read(kept) == expected[change]
        finally:
            second.close()


@pytest.mark.parametrize(
    ("count", "value"),
    [
        pytest.param(known_rows.MOST_PENDING_KEPT, '"x"', id="too-many"),
        # Two such values fit in MOST_PENDING_CHARS, three do not.
        pytest.param(2, '"' + "x" * (known_rows.MOST_PENDING_CHARS // 2 - 3) + '"', id="too-long"),
    ],
)
def test_a_channel_too_full_to_keep_is_read_each_time_and_its_count_kept(
    store: SqliteFlowStore, count: int, value: str
) -> None:
    def fill(tx: StoreTransaction) -> None:
        for n in range(count - 1):
            tx.append_message("f1", "a", "", f"m{n}", value, at(n))

    store.run(fill)
    assert len(store.read(_messages_of_a)) == count - 1  # kept, with room for one more
    store.run(lambda tx: tx.append_message("f1", "a", "", "last", value, at(98)))
    store.run(lambda tx: tx.append_message("f1", "a", "", "one-more", value, at(99)))
    with traced_statements(store) as statements:
        for _ in range(2):
            rows = store.read(_messages_of_a)
            assert [row.message_id for row in rows][-2:] == ["last", "one-more"]
        assert store.read(lambda tx: tx.pending_counts("f1", ["a"])) == {"a": count + 1}
    assert _selects(statements, "channel_messages") == 2  # the count needed no read


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
