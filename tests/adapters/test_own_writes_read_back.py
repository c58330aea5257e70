"""A SQLite transaction reads back a write-once value it wrote as the text it wrote, with no read."""

from __future__ import annotations

from pathlib import Path

from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements

_READ = "SELECT key, value FROM attribute_values"


def test_a_value_written_in_the_transaction_is_read_back_without_a_statement(
    tmp_path: Path,
) -> None:
    def work(tx: StoreTransaction) -> dict[str, str]:
        tx.put_value("f1", "Messages", "1", "one")
        tx.write_values("f1", {("Messages", "2"): "two", ("Messages", "3"): None})
        return tx.get_write_once_values("f1", "Messages", ["1", "2", "3"])

    with sqlite_store_with_a_flow(tmp_path) as store:
        with traced_statements(store) as statements:
            assert store.run(work) == {"1": "one", "2": "two"}
        assert not [sql for sql in statements if sql.startswith(_READ)]
        assert store.read(lambda tx: tx.get_write_once_values("f1", "Messages", ["1", "2"])) == {
            "1": "one",
            "2": "two",
        }


def test_a_write_a_savepoint_undid_is_read_as_stored(tmp_path: Path) -> None:
    def undone(tx: StoreTransaction) -> None:
        tx.put_value("f1", "Messages", "1", "undone")
        raise ValueError("undo it")

    def work(tx: StoreTransaction) -> dict[str, str]:
        assert tx.run_undoable(lambda: undone(tx)).error is not None
        return tx.get_write_once_values("f1", "Messages", ["1"])

    with sqlite_store_with_a_flow(tmp_path) as store:
        store.run(lambda tx: tx.put_value("f1", "Messages", "1", "stored"))
        assert store.run(work) == {"1": "stored"}
