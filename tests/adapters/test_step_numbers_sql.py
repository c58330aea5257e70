"""How the SQLite store counts a Flow run's Steps (``next_step_number``)."""

from __future__ import annotations

from pathlib import Path

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements


def _number(store: SqliteFlowStore, step_type: str) -> int:
    return store.run(lambda tx: tx.next_step_number("f1", step_type))


def test_a_step_number_is_counted_then_read_without_a_returning_clause(tmp_path: Path) -> None:
    # A RETURNING clause makes SQLite gather the rows in an ephemeral table, a B-tree
    # opened and closed per statement: dearer than the count and a read of it.
    with sqlite_store_with_a_flow(tmp_path) as store:
        with traced_statements(store) as statements:
            numbers = [_number(store, "A"), _number(store, "A"), _number(store, "B")]
        assert numbers == [1, 2, 1]
        counted = [sql for sql in statements if "step_counters" in sql]
        # A count and a read for a Step type this connection has not counted yet; one
        # statement for one it has.
        assert len(counted) == 5
        assert not [sql for sql in statements if "RETURNING" in sql.upper()]
        # A number rolled back with its transaction is counted again.
        assert store.run_batch([lambda tx: (tx.next_step_number("f1", "A"), 1 / 0)])[0].error
        assert _number(store, "A") == 3


def test_a_number_counted_last_by_this_connection_is_counted_on_in_one_statement(
    tmp_path: Path,
) -> None:
    with sqlite_store_with_a_flow(tmp_path) as store:
        _number(store, "A")
        with traced_statements(store) as statements:
            assert [_number(store, "A") for _ in range(3)] == [2, 3, 4]
        counted = [sql for sql in statements if "step_counters" in sql]
        assert len(counted) == 3
        assert not [sql for sql in counted if sql.startswith("SELECT")]


def test_a_number_another_connection_counted_meanwhile_is_never_counted_again(
    tmp_path: Path,
) -> None:
    # The other connection logs no change of the run here (a number alone, no new Step),
    # so only the count itself can tell the kept number is behind.
    with sqlite_store_with_a_flow(tmp_path) as one:
        other = SqliteFlowStore(one.path)
        try:
            numbers = [_number(store, "A") for store in (one, other, one, one, other, one)]
        finally:
            other.close()
    assert numbers == [1, 2, 3, 4, 5, 6]
