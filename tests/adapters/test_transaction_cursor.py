"""A SQLite store transaction's statements share one cursor, and no read loses rows to it.

The next statement on a cursor ends the one before, and a read whose rows are
walked while other statements run would then stop short, or walk the other
statement's rows. So those reads run on cursors of their own
(``SqliteTransaction._execute``): a trim walks a Flow type's blocks and single
events together and reads the sizes of blocks it does not know in between. A
read on the shared cursor that an error stops before its last row must not keep
its read snapshot open once its transaction has ended, though the error's
traceback keeps the transaction alive; nor must a read on a cursor of its own
(the blocks a read of events or a trim walks).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from dex_agents.adapters.local.event_blocks import BLOCK_EVENTS
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.store_errors import StoreCorruptError
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import at

FLOWS = ("a1", "a2")


def _append_blocks(store: FlowStore) -> list[int]:
    """Three blocks' worth of events in each of two sessions, interleaved, and a few more."""

    def append(tx: StoreTransaction) -> list[int]:
        return [
            tx.append_event("A", FLOWS[n % 2], f'"{n}"', "s", at(n))
            for n in range(BLOCK_EVENTS * 6 + 10)
        ]

    return store.run(append)


def _every_event(store: FlowStore) -> dict[str, list[tuple[int, str]]]:
    def read(tx: StoreTransaction) -> dict[str, list[tuple[int, str]]]:
        return {
            flow_id: [(row.id, row.value) for row in tx.events_after(flow_id, 0, 10_000)]
            for flow_id in FLOWS
        }

    return store.read(read)


def _trim(capacity: int, tx: StoreTransaction) -> int:
    return tx.trim_events("A", capacity)


def test_a_trim_that_reads_block_sizes_between_its_rows_walks_every_row(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    sqlite, memory = SqliteFlowStore(path), MemoryFlowStore()
    try:
        assert _append_blocks(sqlite) == _append_blocks(memory)
    finally:
        sqlite.close()
    # A store opened again knows no block's sizes: its trim reads each block it walks
    # while it walks the blocks and the single events.
    reopened = SqliteFlowStore(path)
    try:
        per_event = len('"100"')
        for capacity in (per_event * BLOCK_EVENTS * 4, per_event * 5, 0):
            trim = functools.partial(_trim, capacity)
            assert reopened.run(trim) == memory.run(trim)
            assert _every_event(reopened) == _every_event(memory)
    finally:
        reopened.close()


def test_a_read_stopped_by_a_damaged_row_keeps_no_snapshot_while_its_error_lives(
    tmp_path: Path,
) -> None:
    # A seal reads its session's single events on the transaction's cursor; a damaged one
    # stops that read before its last row, and the error's traceback keeps the transaction.
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        store.run(
            lambda tx: [
                tx.append_event("A", "a1", f'"{n}"', "s", at(n)) for n in range(BLOCK_EVENTS - 1)
            ]
        )
        other.execute("UPDATE stream_events SET value = x'02ff' WHERE id = 3")
        with pytest.raises(StoreCorruptError) as raised:
            store.run(lambda tx: tx.append_event("A", "a1", '"last"', "s", at(99)))
        other.execute("CREATE TABLE probe (x)")
        # A statement still open on the store's connection would keep the WAL's frames.
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, raised.value
    finally:
        other.close()
        store.close()


@pytest.mark.parametrize(
    "read",
    [
        lambda tx: tx.events_after("a1", 0, 10_000),
        lambda tx: tx.trim_events("A", 0),
    ],
    ids=["events_after", "trim_events"],
)
def test_a_read_of_its_own_cursor_stopped_by_a_damaged_block_keeps_no_snapshot(
    tmp_path: Path, read: Callable[[StoreTransaction], object]
) -> None:
    # The blocks are read on a cursor of their own, walked across other statements; a
    # damaged block stops that walk before its last row, and the error keeps its frames.
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        store.run(
            lambda tx: [
                tx.append_event("A", "a1", f'"{n}"', "s", at(n))
                for n in range(BLOCK_EVENTS * 3 + 1)
            ]
        )
        store.close()
        store = SqliteFlowStore(path)  # knows no block's sizes: a trim reads each block
        other.execute(
            "UPDATE event_blocks SET events = x'02ff'"
            " WHERE first_id = (SELECT min(first_id) FROM event_blocks)"
        )
        with pytest.raises(StoreCorruptError) as raised:
            store.run(read)
        other.execute("CREATE TABLE probe (x)")
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, raised.value
    finally:
        other.close()
        store.close()
