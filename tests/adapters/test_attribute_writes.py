"""A SQLite store writes a Step's staged values in one upsert and one DELETE per Attribute.

A Step writes back what it staged (``StoreTransaction.write_values``): 1 to 7
values a commit in a tool turn, and each was a statement of its own. What the
file then holds must be what ``put_value`` and ``delete_value`` leave, one by one
(``test_flow_store_equivalence.py`` compares both stores over random writes).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements


def _stored(path: Path) -> dict[tuple[str, str], tuple[int, str]]:
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT rowid, name, key, value FROM attribute_values")
        return {(name, key): (rowid, value) for rowid, name, key, value in rows}
    finally:
        connection.close()


def _writes(statements: list[str]) -> list[str]:
    return [sql.split(" ")[0] for sql in statements if "attribute_values" in sql]


def test_a_steps_values_are_one_upsert_and_one_delete_per_attribute(tmp_path: Path) -> None:
    with sqlite_store_with_a_flow(tmp_path) as store:
        first = {("M", f"k{n}"): f'"{n}"' for n in range(5)} | {("S", ""): '"s"'}
        store.run(lambda tx: tx.write_values("f1", first))
        before = _stored(store.path)
        again: dict[tuple[str, str], str | None] = {
            ("M", "k0"): '"new"',  # set again: the same row, a new value
            ("M", "k1"): None,
            ("M", "k2"): None,
            ("S", ""): None,
            ("M", "k9"): '"9"',
            ("T", ""): '"t"',
        }
        with traced_statements(store) as statements:
            store.run(lambda tx: tx.write_values("f1", again))
        assert _writes(statements) == ["INSERT", "DELETE", "DELETE"]
        after = _stored(store.path)
    assert set(after) == {("M", "k0"), ("M", "k3"), ("M", "k4"), ("M", "k9"), ("T", "")}
    assert after[("M", "k0")] == (before[("M", "k0")][0], '"new"')
    assert after[("M", "k3")] == before[("M", "k3")]


def test_many_values_are_written_in_upserts_of_bounded_size(tmp_path: Path) -> None:
    many = {("M", f"k{n:03}"): f'"{n}"' for n in range(70)}
    with sqlite_store_with_a_flow(tmp_path) as store:
        with traced_statements(store) as statements:
            store.run(lambda tx: tx.write_values("f1", many))
        assert _writes(statements) == ["INSERT"] * 3
        reopened = SqliteFlowStore(store.path)
    try:
        assert reopened.read(lambda tx: tx.get_values("f1", "M")) == {
            key: value for (_, key), value in many.items()
        }
    finally:
        reopened.close()


def test_values_the_file_is_known_to_hold_are_not_written_again(tmp_path: Path) -> None:
    def write_and_read(tx: StoreTransaction) -> dict[str, str]:
        tx.write_values("f1", {("M", "a"): '"1"', ("M", "b"): '"2"'})
        return tx.get_values("f1", "M")

    with sqlite_store_with_a_flow(tmp_path) as store:
        assert store.run(write_and_read) == {"a": '"1"', "b": '"2"'}
        with traced_statements(store) as statements:
            store.run(lambda tx: tx.write_values("f1", {("M", "a"): '"1"', ("M", "c"): None}))
        assert _writes(statements) == []
