"""The SQLite store's sealed Stream blocks: the same events as the memory store, fewer rows.

The Stream contract tests (``test_flow_store_streams.py``) append a few events;
these append enough that sessions seal blocks, interleaved with other sessions
and trimmed across them, and compare every read with ``MemoryFlowStore``'s.
"""

from __future__ import annotations

import functools
import random
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.adapters.local.event_blocks import (
    BLOCK_EVENTS,
    block_sizes,
    decode_block,
    encode_block,
    sizes_in_id_order,
)
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.store_errors import StoredValueError
from dex_agents.ports.flow_rows import EventRow
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import at
from tests.adapters.traced_sql import traced_statements

FLOWS = {"a1": "A", "a2": "A", "b1": "B"}


def _reads(store: FlowStore, ids: list[int]) -> dict[str, object]:
    def read(tx: StoreTransaction) -> dict[str, object]:
        return {
            "all": {flow_id: tx.events_after(flow_id, 0, 10_000) for flow_id in FLOWS},
            "last": {flow_id: tx.last_event_id(flow_id) for flow_id in FLOWS},
            "pages": {
                (flow_id, after, limit): tx.events_after(flow_id, after, limit)
                for flow_id in FLOWS
                for after in ids[:: max(len(ids) // 7, 1)]
                for limit in (1, 5, 70)
            },
            "each": [tx.get_event(event_id) for event_id in ids[:: max(len(ids) // 20, 1)]],
        }

    return store.read(read)


appends = st.lists(
    st.tuples(st.sampled_from(sorted(FLOWS)), st.text(alphabet='xé\n"\\', max_size=12)),
    min_size=1,
    max_size=90,
)
transactions = st.lists(
    st.one_of(
        st.tuples(st.just("append"), appends, st.none()),
        st.tuples(st.just("trim"), st.sampled_from("AB"), st.integers(0, 600)),
    ),
    min_size=1,
    max_size=8,
)


def _apply(store: FlowStore, step: tuple[str, object, object]) -> object:
    kind, first, second = step

    def append(tx: StoreTransaction) -> list[int]:
        assert isinstance(first, list)
        return [
            tx.append_event(FLOWS[flow_id], flow_id, value, f"s{n}", at(n))
            for n, (flow_id, value) in enumerate(first)
        ]

    def trim(tx: StoreTransaction) -> int:
        assert isinstance(first, str)
        assert isinstance(second, int)
        return tx.trim_events(first, second)

    return store.run(append if kind == "append" else trim)


@settings(max_examples=40, deadline=None)
@given(transactions)
def test_sealed_blocks_read_and_trim_as_the_memory_store(
    tmp_path_factory: pytest.TempPathFactory, work: list[tuple[str, object, object]]
) -> None:
    path = tmp_path_factory.mktemp("blocks") / "flows.sqlite3"
    sqlite, memory = SqliteFlowStore(path), MemoryFlowStore()
    ids: list[int] = []
    try:
        for step in work:
            result = _apply(sqlite, step)
            assert result == _apply(memory, step)
            if isinstance(result, list):
                ids.extend(result)
            assert _reads(sqlite, ids) == _reads(memory, ids)
    finally:
        sqlite.close()


def _append(store: FlowStore, flow_id: str, value: str, n: int = 0) -> int:
    return store.run(lambda tx: tx.append_event(FLOWS[flow_id], flow_id, value, "s", at(n)))


def _trim(store: FlowStore, capacity: int) -> int:
    return store.run(lambda tx: tx.trim_events("A", capacity))


def _raw(path: Path, sql: str) -> int:
    connection = sqlite3.connect(path)
    try:
        return int(connection.execute(sql).fetchone()[0])
    finally:
        connection.close()


def test_a_long_stream_is_kept_in_blocks_and_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    sqlite, memory = SqliteFlowStore(path), MemoryFlowStore()
    chooser = random.Random(7)
    events = [
        (chooser.choice(sorted(FLOWS)), f'{{"n":{n},"text":"{"é" * (n % 9)}"}}') for n in range(300)
    ]
    try:
        ids = [_append(sqlite, flow_id, value, n) for n, (flow_id, value) in enumerate(events)]
        assert [
            _append(memory, flow_id, value, n) for n, (flow_id, value) in enumerate(events)
        ] == ids
        assert _raw(path, "SELECT count(*) FROM event_blocks") >= 300 // BLOCK_EVENTS - len(FLOWS)
        assert _reads(sqlite, ids) == _reads(memory, ids)
        # Trimming part of the oldest block keeps its bytes and hides its trimmed events.
        trimmed = sqlite.run(lambda tx: tx.trim_events("A", 4_000))
        assert trimmed == memory.run(lambda tx: tx.trim_events("A", 4_000))
        assert trimmed > 0
        assert _raw(path, "SELECT count(*) FROM event_blocks WHERE trimmed_to > 0") >= 1
        assert _reads(sqlite, ids) == _reads(memory, ids)
    finally:
        sqlite.close()


def test_a_seal_that_rolls_back_leaves_the_single_events(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    try:
        for n in range(BLOCK_EVENTS - 1):
            _append(store, "a1", f'"{n}"')

        def seal_then_fail(tx: StoreTransaction) -> None:
            tx.append_event("A", "a1", '"sealing"', "s", at(0))
            raise RuntimeError("the commit fails after the seal")

        with pytest.raises(RuntimeError, match="after the seal"):
            store.run(seal_then_fail)
        assert _raw(path, "SELECT count(*) FROM event_blocks") == 0
        _append(store, "a1", '"last"')
        assert _raw(path, "SELECT count(*) FROM event_blocks") == 1
        assert _raw(path, "SELECT count(*) FROM stream_events") == 0
        values = [event.value for event in store.read(lambda tx: tx.events_after("a1", 0, 100))]
        assert values == [f'"{n}"' for n in range(BLOCK_EVENTS - 1)] + ['"last"']
    finally:
        store.close()


@pytest.mark.parametrize(
    ("blocks", "singles", "expected"),
    [
        ([], [], []),
        ([], [(3, 1), (5, 2)], [(3, 1), (5, 2)]),
        ([(2, [(2, 1), (9, 1)])], [(5, 1)], [(2, 1), (5, 1), (9, 1)]),
        (
            [(1, [(1, 1), (6, 1)]), (2, [(2, 4), (4, 1)])],
            [(3, 7)],
            [(1, 1), (2, 4), (3, 7), (4, 1), (6, 1)],
        ),
        ([(4, [])], [(1, 1)], [(1, 1)]),
    ],
    ids=["nothing", "singles-only", "block-around-a-single", "blocks-interleaved", "empty-block"],
)
def test_a_flow_types_events_are_walked_oldest_first(
    blocks: list[tuple[int, list[tuple[int, int]]]],
    singles: list[tuple[int, int]],
    expected: list[tuple[int, int]],
) -> None:
    walked = list(sizes_in_id_order(blocks, singles))
    assert [(event_id, size) for event_id, size, _ in walked] == expected
    from_blocks = {event_id for _, events in blocks for event_id, _ in events}
    assert [in_block for _, _, in_block in walked] == [n in from_blocks for n, _ in expected]


def test_a_block_reads_back_its_events_and_refuses_damage() -> None:
    events = [(5, "s1", at(1).isoformat(), '"a\\n"'), (9, "s2", at(2).isoformat(), "é\n")]
    stored = encode_block(events)
    read = decode_block(5, 0, "A", "a1", stored)
    assert [(e.id, e.source, e.created_at, e.value) for e in read] == [
        (5, "s1", at(1), '"a\\n"'),
        (9, "s2", at(2), "é\n"),
    ]
    assert [e.id for e in decode_block(5, 5, "A", "a1", stored)] == [9]
    assert block_sizes(5, stored) == ((5, 5), (9, 3))  # UTF-8 bytes, trimmed or not
    with pytest.raises(StoredValueError, match="the Stream block 6 is damaged"):
        decode_block(6, 0, "A", "a1", stored)


def test_a_file_written_before_blocks_seals_a_sessions_many_events_in_blocks_of_64(
    tmp_path: Path,
) -> None:
    # A version 2 file kept every event as a row; after the upgrade, the session's next
    # event seals them all, in blocks of BLOCK_EVENTS, and the rest stay single.
    path = tmp_path / "flows.sqlite3"
    SqliteFlowStore(path).close()
    old_events = 2 * BLOCK_EVENTS + 22
    connection = sqlite3.connect(path)
    with connection:
        connection.executemany(
            "INSERT INTO stream_events (flow_type, flow_id, value, size, source, created_at)"
            " VALUES ('A', 'a1', ?, ?, 's', '2026-12-01T00:00:00.000000+00:00')",
            [(f'"{n}"', len(f'"{n}"')) for n in range(old_events)],
        )
    connection.close()
    store = SqliteFlowStore(path)
    try:
        _append(store, "a1", '"new"')
        values = [event.value for event in store.read(lambda tx: tx.events_after("a1", 0, 500))]
    finally:
        store.close()
    assert values == [f'"{n}"' for n in range(old_events)] + ['"new"']
    assert _raw(path, "SELECT count(*) FROM event_blocks") == 2
    assert _raw(path, "SELECT count(*) FROM stream_events") == old_events + 1 - 2 * BLOCK_EVENTS


def test_two_files_in_one_process_trim_by_their_own_blocks_sizes(tmp_path: Path) -> None:
    # Event IDs restart in every file, so two files hold blocks with the same first and
    # last IDs; what one store learned of its blocks' sizes must not trim the other's.
    stores = {size: SqliteFlowStore(tmp_path / f"{size}.sqlite3") for size in (1, 50)}
    memories = {size: MemoryFlowStore() for size in stores}
    try:
        for size in stores:
            for store in (stores[size], memories[size]):
                for n in range(BLOCK_EVENTS * 2):
                    _append(store, "a1", "x" * size, n)
        for size in stores:  # the 1-byte file first: its sizes are learned first
            assert _trim(stores[size], 10 * size) == _trim(memories[size], 10 * size)
            assert _reads(stores[size], []) == _reads(memories[size], [])
    finally:
        for store in stores.values():
            store.close()


def _events_after(flow_id: str, after: int, tx: StoreTransaction) -> list[EventRow]:
    return list(tx.events_after(flow_id, after, 10))


def test_a_read_from_past_a_single_event_reads_no_block_and_any_position_reads_what_follows(
    tmp_path: Path,
) -> None:
    # A seal moves a run's single events into a block, so every event a block holds is
    # older than its single ones: a read from at or past one of them (a reader following
    # its session, from the newest event it saw) needs no look at the blocks, and a read
    # from any other position still gets them.
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")
    try:
        ids = []
        for n in range(BLOCK_EVENTS + 6):
            ids.append(_append(store, "a1", f'"{n}"', n))
            _append(store, "b1", f'"other {n}"', n)  # so a1's IDs have gaps
        whole = store.read(lambda tx: tx.events_after("a1", 0, 1_000))
        assert [event.id for event in whole] == ids
        positions = sorted({0, *ids, *(event_id + 1 for event_id in ids)})

        def pages(tx: StoreTransaction) -> list[list[EventRow]]:
            return [
                list(tx.events_after("a1", after, limit))
                for after in positions
                for limit in (1, 3, 1_000)
            ]

        assert store.read(pages) == [
            [event for event in whole if event.id > after][:limit]
            for after in positions
            for limit in (1, 3, 1_000)
        ]
        for after in (ids[-3], ids[-1] - 1, ids[-1], ids[-1] + 5):
            with traced_statements(store) as statements:
                store.read(functools.partial(_events_after, "a1", after))
            assert not [sql for sql in statements if "event_blocks" in sql], after
        with traced_statements(store) as statements:
            store.read(lambda tx: tx.events_after("a1", ids[3], 10))
        assert [sql for sql in statements if "event_blocks" in sql]
    finally:
        store.close()
