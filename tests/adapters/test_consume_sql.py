"""How the SQLite store consumes a Channel message a wait just read (``consume_messages``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from dex_agents.adapters.local.known_rows import MOST_PENDING_CHARS
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import MessageRow
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements

_NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _append(store: SqliteFlowStore, message_id: str) -> int:
    return store.run(lambda tx: tx.append_message("f1", "user", "", message_id, "{}", _NOW))


def _pending(tx: StoreTransaction) -> Sequence[MessageRow]:
    return tx.pending_messages("f1", "user", "")


def _consume_the_first_twice(tx: StoreTransaction) -> None:
    pending = tx.pending_messages("f1", "user", "")
    tx.consume_messages([pending[0].seq])
    tx.consume_messages([pending[0].seq])  # consumed already: nothing to take again


def _read_and_consume(tx: StoreTransaction) -> list[int]:
    _consume_the_first_twice(tx)
    return [row.seq for row in tx.pending_messages("f1", "user", "")]


def test_a_message_just_read_is_consumed_once_without_a_returning_clause(tmp_path: Path) -> None:
    # A RETURNING clause makes SQLite gather the rows in an ephemeral table, a B-tree
    # opened and closed per statement; a row read of the message already names its
    # run, Channel and key, which never change.
    with sqlite_store_with_a_flow(tmp_path) as store:
        first, second = _append(store, "m1"), _append(store, "m2")
        other = SqliteFlowStore(tmp_path / "flows.sqlite3")
        try:
            # The other connection keeps the run's pending messages and their count.
            assert [row.seq for row in other.run(_pending)] == [first, second]
            assert other.run(lambda tx: tx.pending_counts("f1", ["user"])) == {"user": 2}
            with traced_statements(store) as statements:
                left = store.run(_read_and_consume)
            assert left == [second]
            assert not [sql for sql in statements if "RETURNING" in sql.upper()]
            # The commit logged the run as changed: the other connection forgets what
            # it kept, and both count the message consumed once.
            assert [row.seq for row in other.run(_pending)] == [second]
            assert other.run(lambda tx: tx.pending_counts("f1", ["user"])) == {"user": 1}
            assert store.run(lambda tx: tx.pending_counts("f1", ["user"])) == {"user": 1}
        finally:
            other.close()


def test_a_message_not_read_in_the_transaction_is_consumed_all_the_same(tmp_path: Path) -> None:
    with sqlite_store_with_a_flow(tmp_path) as store:
        seq = _append(store, "m1")
        store.run(lambda tx: tx.consume_messages([seq]))
        assert store.run(lambda tx: tx.pending_messages("f1", "user", "")) == []
        assert store.run(lambda tx: tx.pending_counts("f1", ["user"])) == {}


def test_a_message_consumed_twice_is_counted_taken_once(tmp_path: Path) -> None:
    # Past MOST_PENDING_CHARS only the Channel's count is kept, so only the statement's
    # own count of rows it changed stops a second consume from taking one more.
    with sqlite_store_with_a_flow(tmp_path) as store:
        big = "x" * MOST_PENDING_CHARS
        store.run(
            lambda tx: [
                tx.append_message("f1", "user", "", message_id, big, _NOW)
                for message_id in ("m1", "m2", "m3")
            ]
        )
        store.run(_consume_the_first_twice)
        assert store.run(lambda tx: tx.pending_counts("f1", ["user"])) == {"user": 2}
