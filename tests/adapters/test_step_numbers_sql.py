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
        assert len(counted) == 6  # a count and a read each
        assert not [sql for sql in statements if "RETURNING" in sql.upper()]
        # A number rolled back with its transaction is counted again.
        assert store.run_batch([lambda tx: (tx.next_step_number("f1", "A"), 1 / 0)])[0].error
        assert _number(store, "A") == 3
