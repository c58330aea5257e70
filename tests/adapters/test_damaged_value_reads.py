"""Reads of a damaged Attribute value on the SQLite store: what they raise, and what they leave.

The value is damaged the way a bad disk or another program would: bytes that are
no UTF-8 stored as TEXT, or a BLOB that no longer inflates. Each store is opened
after the damage, as a restarted program would, so nothing it kept hides it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import (
    SqliteFlowStore,
    StoreCorruptError,
)
from dex_agents.ports.flow_rows import FlowRow, FlowStatus
from dex_agents.ports.flow_store import StoreTransaction

DAMAGES = {
    "not-utf8": "CAST(x'ff22' AS TEXT)",
    "not-inflating": "x'01ffffffff'",
}


def raw_write(path: Path, sql: str, params: tuple[object, ...] = ()) -> None:
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(sql, params)


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, str]:
    """A store file with Flow run ``f1``: singleton ``A`` and map ``M`` keys ``k1``, ``k2``."""
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    now = datetime.now(UTC)

    def fill(tx: StoreTransaction) -> None:
        tx.insert_flow(FlowRow("f1", "T", "r1", FlowStatus.RUNNING, "null", now))
        tx.put_value("f1", "A", "", '"a"')
        tx.put_value("f1", "M", "k1", '"one"')
        tx.put_value("f1", "M", "k2", '"two"')

    store.run(fill)
    store.close()
    return path, "f1"


def damage(path: Path, name: str, key: str, value_sql: str) -> None:
    raw_write(
        path,
        f"UPDATE attribute_values SET value = {value_sql} WHERE name = ? AND key = ?",
        (name, key),
    )


READS: dict[str, tuple[str, str, Callable[[StoreTransaction], object]]] = {
    "singletons": ("A", "", lambda tx: tx.get_singletons("f1", ["A"])),
    "value": ("M", "k2", lambda tx: tx.get_value("f1", "M", "k2")),
    "map": ("M", "k2", lambda tx: tx.get_values("f1", "M")),
    "write-once": ("M", "k2", lambda tx: tx.get_write_once_values("f1", "M")),
}


@pytest.mark.parametrize("value_sql", DAMAGES.values(), ids=DAMAGES.keys())
@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_a_read_of_a_damaged_value_names_the_attribute_the_key_and_the_flow_run(
    damaged: tuple[Path, str],
    read: tuple[str, str, Callable[[StoreTransaction], object]],
    value_sql: str,
) -> None:
    path, _ = damaged
    name, key, work = read
    damage(path, name, key, value_sql)
    store = SqliteFlowStore(path)
    try:
        with pytest.raises(StoreCorruptError) as raised:
            store.read(work)
    finally:
        store.close()
    where = f"Attribute {name!r}" + ("" if key == "" else f", key {key!r},")
    assert str(path) in str(raised.value)
    assert f"the stored value of {where} of Flow run 'f1'" in str(raised.value)


def test_a_read_stopped_by_a_damaged_value_leaves_no_snapshot_held(
    damaged: tuple[Path, str],
) -> None:
    path, _ = damaged
    damage(path, "A", "", DAMAGES["not-utf8"])
    store = SqliteFlowStore(path, busy_timeout=timedelta(seconds=1))
    try:
        # Kept, as a client that reports it or a test that collects it keeps it.
        with pytest.raises(StoreCorruptError) as kept:
            store.read(lambda tx: tx.get_singletons("f1", ["A"]))
        raw_write(path, "INSERT INTO attribute_values VALUES ('f1', 'B', '', '1')")
        # Before, the stopped statement kept its snapshot: after another connection's
        # write, each write of this store waited out the busy timeout and failed.
        store.run(lambda tx: tx.put_value("f1", "C", "", '"c"'))
        assert store.read(lambda tx: tx.get_singletons("f1", ["C"])) == {"C": '"c"'}
        assert kept.value is not None
    finally:
        store.close()


@pytest.mark.parametrize("works", [1, 2], ids=["lone", "batched"])
def test_a_batched_work_that_reads_a_damaged_value_fails_naming_the_file_and_the_value(
    damaged: tuple[Path, str], works: int
) -> None:
    path, _ = damaged
    damage(path, "A", "", DAMAGES["not-utf8"])
    store = SqliteFlowStore(path)
    try:

        def reads_damaged(tx: StoreTransaction) -> object:
            return tx.get_singletons("f1", ["A"])

        def writes(tx: StoreTransaction) -> None:
            tx.put_value("f1", "C", "", '"c"')

        outcomes = store.run_batch([reads_damaged, writes][:works])
        # A client's write RPC goes through a batch: before, its error named neither the
        # file nor, in a batch of several, anything at all (SQLite's UTF-8 error failed
        # the whole batch, the other works' too).
        error = outcomes[0].error
        assert isinstance(error, StoreCorruptError)
        assert str(error).startswith(f"{path} is damaged: the stored value of Attribute 'A'")
        if works == 2:
            assert outcomes[1].error is None
            assert store.read(lambda tx: tx.get_singletons("f1", ["C"])) == {"C": '"c"'}
    finally:
        store.close()
