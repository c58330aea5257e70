"""A read served from the kept rows alone begins no transaction (``kept_reads``).

It checks ``PRAGMA data_version`` once, at its first use of the kept rows; its
first statement, if it runs one, begins the transaction. When another
connection committed in between, what the read took from the kept rows may not
match the transaction's snapshot, so the read runs again, in a transaction from
its start. A read whose first statement comes before any use of the kept rows
checks them in its transaction alone.
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
        store.run(lambda tx: tx.put_value("f1", "Settings", "", '"first"'))
        store.read(lambda tx: tx.get_value("f1", "Settings", ""))  # now kept
        yield store


def _other_connection_sets(store: SqliteFlowStore, name: str, value: str) -> None:
    # Another store on the file: another process's connection, which logs what it changes.
    other = SqliteFlowStore(store.path)
    try:
        other.run(lambda tx: tx.put_value("f1", name, "", value))
    finally:
        other.close()


def test_a_read_of_kept_rows_runs_one_statement_and_no_transaction(
    store: SqliteFlowStore,
) -> None:
    with traced_statements(store) as statements:
        assert store.read(lambda tx: tx.get_value("f1", "Settings", "")) == '"first"'
    assert statements == ["PRAGMA data_version"]


def test_a_read_that_needs_a_row_begins_the_transaction_at_its_first_statement(
    store: SqliteFlowStore,
) -> None:
    def work(tx: StoreTransaction) -> tuple[str | None, str | None]:
        return tx.get_value("f1", "Settings", ""), tx.get_value("f1", "Other", "")

    with traced_statements(store) as statements:
        assert store.read(work) == ('"first"', None)
    assert statements[0] == "PRAGMA data_version"
    assert "BEGIN DEFERRED" in statements
    assert statements[-1] == "COMMIT"


def test_a_commit_of_another_connection_before_the_first_statement_runs_the_read_again(
    store: SqliteFlowStore,
) -> None:
    runs = 0

    def work(tx: StoreTransaction) -> tuple[str | None, str | None]:
        nonlocal runs
        runs += 1
        kept = tx.get_value("f1", "Settings", "")
        if runs == 1:  # another process commits after the kept value was served
            _other_connection_sets(store, "Settings", '"second"')
            _other_connection_sets(store, "Other", '"also second"')
        return kept, tx.get_value("f1", "Other", "")

    # Both values from one snapshot: never the kept "first" beside the new "Other".
    assert store.read(work) == ('"second"', '"also second"')
    assert runs == 2


def test_a_commit_of_another_connection_before_the_read_is_seen(store: SqliteFlowStore) -> None:
    _other_connection_sets(store, "Settings", '"second"')
    assert store.read(lambda tx: tx.get_value("f1", "Settings", "")) == '"second"'


def _stream_then_value(tx: StoreTransaction) -> tuple[int, str | None]:
    # A Stream read runs its statement before it uses anything kept.
    return len(tx.events_after("f1", 0, 10)), tx.get_value("f1", "Settings", "")


def test_a_read_that_starts_with_a_statement_checks_the_kept_rows_in_its_transaction_alone(
    store: SqliteFlowStore,
) -> None:
    with traced_statements(store) as statements:
        assert store.read(_stream_then_value) == (0, '"first"')
    # Not once before the transaction and again in it: in it, right after its BEGIN.
    begin = statements.index("BEGIN DEFERRED")
    assert statements.count("PRAGMA data_version") == 1
    assert statements[begin + 1] == "PRAGMA data_version"
    assert statements[-1] == "COMMIT"


def test_a_read_that_starts_with_a_statement_sees_another_connection_s_commit(
    store: SqliteFlowStore,
) -> None:
    other = SqliteFlowStore(store.path)  # another process's connection
    try:
        other.run(lambda tx: tx.append_event("Agent", "f1", '"a"', "test", at(1)))
    finally:
        other.close()
    _other_connection_sets(store, "Settings", '"second"')
    # The kept "first" is forgotten in the read's transaction, which its first statement began.
    assert store.read(_stream_then_value) == (1, '"second"')


def test_a_read_that_fails_after_its_first_statement_leaves_no_transaction_open(
    store: SqliteFlowStore,
) -> None:
    def work(tx: StoreTransaction) -> None:
        tx.get_value("f1", "Other", "")
        raise ValueError("the work's own failure")

    with pytest.raises(ValueError, match="the work's own failure"):
        store.read(work)
    connection = store._connection  # whether it was left in a transaction is the point
    assert connection is not None
    assert not connection.in_transaction
    store.run(lambda tx: tx.put_value("f1", "Settings", "", '"third"'))
    assert store.read(lambda tx: tx.get_value("f1", "Settings", "")) == '"third"'


def test_a_read_that_tries_to_write_is_refused_without_a_transaction_left_open(
    store: SqliteFlowStore,
) -> None:
    with pytest.raises(RuntimeError, match="must not write"):
        store.read(lambda tx: tx.put_value("f1", "Settings", "", '"written"'))
    connection = store._connection
    assert connection is not None
    assert not connection.in_transaction
    assert store.read(lambda tx: tx.get_value("f1", "Settings", "")) == '"first"'
