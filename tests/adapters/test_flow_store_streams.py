"""The ``FlowStore`` contract: stream events, read after an ID and trimmed by capacity.

Each test runs on both stores (the ``store`` fixture of conftest.py), which must give
the same results.
"""

from __future__ import annotations

import pytest

from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import at


def test_events_are_read_after_an_id_per_flow(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> list[int]:
        return [
            tx.append_event("Agent", flow_id, f'"{n}"', f"Step-{n}", at(n))
            for n, flow_id in enumerate(["f1", "f2", "f1", "f1"])
        ]

    ids = store.run(append)
    assert ids == sorted(ids)
    after = store.run(lambda tx: tx.events_after("f1", 0, 10))
    assert [(e.id, e.flow_id, e.value, e.source) for e in after] == [
        (ids[0], "f1", '"0"', "Step-0"),
        (ids[2], "f1", '"2"', "Step-2"),
        (ids[3], "f1", '"3"', "Step-3"),
    ]
    assert [e.id for e in store.run(lambda tx: tx.events_after("f1", ids[0], 1))] == [ids[2]]
    assert store.run(lambda tx: tx.events_after("f1", ids[3], 10)) == []
    event = store.run(lambda tx: tx.get_event(ids[1]))
    assert event is not None
    assert (event.flow_type, event.flow_id, event.created_at) == ("Agent", "f2", at(1))
    assert store.run(lambda tx: tx.get_event(ids[3] + 100)) is None
    assert store.run(lambda tx: tx.last_event_id("f1")) == ids[3]
    assert store.run(lambda tx: tx.last_event_id("f2")) == ids[1]
    assert store.run(lambda tx: tx.last_event_id("none")) == 0


def test_trimming_drops_a_flow_types_oldest_events_across_its_flows(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> list[int]:
        return [
            tx.append_event("Agent", "f1", "x" * 10, "s", at(0)),
            tx.append_event("Agent", "f2", "é" * 10, "s", at(1)),  # 20 UTF-8 bytes
            tx.append_event("Other", "o1", "x" * 50, "s", at(2)),
            tx.append_event("Agent", "f1", "x" * 10, "s", at(3)),
            tx.append_event("Agent", "f2", "x" * 10, "s", at(4)),
        ]

    ids = store.run(append)
    assert store.run(lambda tx: tx.trim_events("Agent", 50)) == 0
    assert store.run(lambda tx: tx.trim_events("Agent", 35)) == 2
    assert store.run(lambda tx: tx.get_event(ids[0])) is None
    assert store.run(lambda tx: tx.get_event(ids[1])) is None
    assert [e.id for e in store.run(lambda tx: tx.events_after("f1", 0, 10))] == [ids[3]]
    assert store.run(lambda tx: tx.last_event_id("f1")) == ids[3]  # of the retained events
    assert [e.id for e in store.run(lambda tx: tx.events_after("f2", 0, 10))] == [ids[4]]
    assert store.run(lambda tx: tx.get_event(ids[2])) is not None
    assert store.run(lambda tx: tx.trim_events("Agent", 20)) == 0
    assert store.run(lambda tx: tx.trim_events("Agent", 0)) == 2
    later = store.run(lambda tx: tx.append_event("Agent", "f1", "1", "s", at(5)))
    assert later > ids[4]
    assert store.run(lambda tx: tx.trim_events("Agent", 1)) == 0
    with pytest.raises(ValueError, match="capacity_bytes must be 0 or more, not -1"):
        store.run(lambda tx: tx.trim_events("Agent", -1))


class _Undone(Exception):
    pass


@pytest.mark.parametrize("undone_by", ["transaction", "savepoint"])
def test_a_block_sealed_in_a_rolled_back_commit_leaves_no_trace_in_later_trims(
    store: FlowStore, undone_by: str
) -> None:
    # A rollback hands the IDs of the events it undid out again: a block sealed and
    # walked by a trim in it, then undone, has the IDs of a later block whose events
    # differ. That later block must be trimmed by its own events' sizes (a Step whose
    # result the store refused is rolled back and runs again, appending its events anew).
    def seal_trim_and_fail(tx: StoreTransaction) -> None:
        for _ in range(64):
            tx.append_event("Agent", "f1", "x" * 10, "s", at(0))
        tx.trim_events("Agent", 0)
        raise _Undone

    if undone_by == "transaction":
        with pytest.raises(_Undone):
            store.run(seal_trim_and_fail)
    else:
        outcome, kept = store.run_batch(
            [seal_trim_and_fail, lambda tx: tx.put_value("f1", "Name", "", '"kept"')]
        )
        assert isinstance(outcome.error, _Undone)
        assert kept.error is None
    ids = store.run(
        lambda tx: [tx.append_event("Agent", "f1", "y" * 100, "s", at(1)) for _ in range(64)]
    )
    assert store.run(lambda tx: tx.trim_events("Agent", 5_400)) == 10
    left = store.run(lambda tx: tx.events_after("f1", 0, 100))
    assert [event.id for event in left] == ids[10:]
    # The Flow type's size stayed right: ten more events fit under a capacity of 64.
    store.run(lambda tx: [tx.append_event("Agent", "f1", "y" * 100, "s", at(2)) for _ in range(10)])
    assert store.run(lambda tx: tx.trim_events("Agent", 6_400)) == 0
