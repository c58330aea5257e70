"""The ``FlowStore`` contract: every primitive, atomicity and serialization, on both stores.

Each test runs against an SQLite store on a file and against the memory store,
which must give the same results. The SQLite-only tests at the end pin its
durability settings, its sharing between connections and its errors.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import (
    SCHEMA_VERSION,
    SqliteFlowStore,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreVersionError,
)
from dex_agents.ports.errors import EngineError
from dex_agents.ports.flow_store import (
    ExecutionRow,
    ExecutionStatus,
    FlowRow,
    FlowStatus,
    FlowStore,
    StoreTransaction,
)

T0 = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def flow(flow_id: str, status: FlowStatus = FlowStatus.RUNNING, created: float = 0) -> FlowRow:
    return FlowRow(
        flow_id=flow_id,
        flow_type="Agent",
        run_id=f"run-{flow_id}",
        status=status,
        input='{"q": 1}',
        created_at=at(created),
    )


def execution(flow_id: str = "f1", step_type: str = "Step", **changes: Any) -> ExecutionRow:
    row = ExecutionRow(
        flow_id=flow_id,
        step_type=step_type,
        step_execution_id=f"{step_type}-1",
        input="null",
        status=ExecutionStatus.READY,
        created_at=T0,
    )
    return replace(row, **changes)


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowStore]:
    opened: FlowStore = (
        SqliteFlowStore(tmp_path / "flows.sqlite3")
        if request.param == "sqlite"
        else MemoryFlowStore()
    )
    yield opened
    opened.close()


def add_flows(store: FlowStore, *rows: FlowRow) -> None:
    def work(tx: StoreTransaction) -> None:
        for row in rows:
            tx.insert_flow(row)

    store.run(work)


def add_executions(store: FlowStore, *rows: ExecutionRow) -> list[int]:
    return store.run(lambda tx: [tx.insert_execution(row) for row in rows])


# Flow runs


def test_flows_are_inserted_read_listed_oldest_first_and_updated(store: FlowStore) -> None:
    add_flows(store, flow("late", created=5), flow("early", created=1), flow("tie", created=5))
    assert store.run(lambda tx: [row.flow_id for row in tx.list_flows()]) == [
        "early",
        "late",
        "tie",
    ]
    closed = replace(
        flow("late", FlowStatus.FAILED, created=5),
        closed_at=at(9),
        output='"out"',
        failure_reason="boom",
    )
    store.run(lambda tx: tx.update_flow(closed))
    assert store.run(lambda tx: tx.get_flow("late")) == closed
    assert store.run(lambda tx: tx.get_flow("missing")) is None


def test_a_flow_id_is_stored_once_and_an_unknown_one_cannot_be_updated(store: FlowStore) -> None:
    add_flows(store, flow("f1"))
    with pytest.raises(ValueError, match="a Flow run with ID 'f1' is already stored"):
        add_flows(store, flow("f1"))
    with pytest.raises(LookupError, match="no Flow run with ID 'nope' is stored"):
        store.run(lambda tx: tx.update_flow(flow("nope")))


def test_times_round_trip_exactly_and_come_back_in_utc(store: FlowStore) -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    local = datetime(2031, 7, 8, 9, 10, 11, 123456, tzinfo=india)
    add_flows(store, replace(flow("f1"), created_at=local, closed_at=local))
    row = add_executions(store, execution(timer_at=local, heartbeat_at=local))[0]

    def read(tx: StoreTransaction) -> list[datetime | None]:
        got_flow, got_execution = tx.get_flow("f1"), tx.get_execution(row)
        assert got_flow is not None
        assert got_execution is not None
        tx.append_message("f1", "inbox", "", "m1", "1", local)
        tx.append_event("Agent", "f1", "{}", "Step-1", local)
        message = tx.pending_messages("f1", "inbox", "")[0]
        event = tx.events_after("f1", 0, 1)[0]
        return [
            got_flow.created_at,
            got_flow.closed_at,
            got_execution.timer_at,
            got_execution.heartbeat_at,
            message.created_at,
            event.created_at,
        ]

    for value in store.run(read):
        assert value == local
        assert value is not None
        assert value.tzinfo == UTC


def test_a_naive_datetime_is_refused_with_the_field_named(store: FlowStore) -> None:
    naive = datetime(2030, 1, 1)
    with pytest.raises(ValueError, match=r"FlowRow\.created_at must be a timezone-aware datetime"):
        add_flows(store, replace(flow("f1"), created_at=naive))
    with pytest.raises(ValueError, match=r"ExecutionRow\.not_before must be a timezone-aware"):
        add_executions(store, execution(not_before=naive))


# Attribute values


def test_attribute_values_are_set_read_listed_by_key_and_unset(store: FlowStore) -> None:
    def work(tx: StoreTransaction) -> None:
        tx.put_value("f1", "notes", "", '"one"')
        tx.put_value("f1", "notes", "", '"two"')
        tx.put_value("f1", "tasks", "b", "2")
        tx.put_value("f1", "tasks", "a", "1")
        tx.put_value("f2", "tasks", "c", "3")
        tx.delete_value("f1", "tasks", "never-set")

    store.run(work)
    assert store.run(lambda tx: tx.get_value("f1", "notes", "")) == '"two"'
    assert store.run(lambda tx: tx.get_value("f1", "missing", "")) is None
    values = store.run(lambda tx: tx.get_values("f1", "tasks"))
    assert list(values.items()) == [("a", "1"), ("b", "2")]
    store.run(lambda tx: tx.delete_value("f1", "tasks", "a"))
    assert store.run(lambda tx: tx.get_values("f1", "tasks")) == {"b": "2"}
    assert store.run(lambda tx: tx.get_values("f1", "nothing")) == {}


# Channel messages


def test_messages_are_first_in_first_out_and_consumed_once(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> list[int]:
        return [
            tx.append_message("f1", "inbox", "", "m1", '"a"', at(1)),
            tx.append_message("f1", "inbox", "", "m2", '"b"', at(2)),
            tx.append_message("f1", "other", "", "m3", '"c"', at(3)),
            tx.append_message("f1", "inbox", "", "m4", '"d"', at(4)),
        ]

    seqs = store.run(append)
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == 4
    pending = store.run(lambda tx: tx.pending_messages("f1", "inbox", ""))
    assert [(m.message_id, m.value, m.seq) for m in pending] == [
        ("m1", '"a"', seqs[0]),
        ("m2", '"b"', seqs[1]),
        ("m4", '"d"', seqs[3]),
    ]
    assert pending[0].channel == "inbox"
    assert pending[0].created_at == at(1)
    store.run(lambda tx: tx.consume_messages([seqs[0], seqs[1]]))
    left = store.run(lambda tx: tx.pending_messages("f1", "inbox", ""))
    assert [m.message_id for m in left] == ["m4"]
    with pytest.raises(ValueError, match="a Channel message with ID 'm1' is already stored"):
        store.run(lambda tx: tx.append_message("f1", "inbox", "", "m1", "1", at(5)))


def test_channel_map_keys_with_pending_messages_come_oldest_first(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> None:
        for number, key in enumerate(["zeta", "alpha", "zeta", "mid"]):
            tx.append_message("f1", "replies", key, f"m{number}", "1", at(number))
        tx.append_message("f2", "replies", "other-flow", "x", "1", at(9))

    store.run(append)
    assert store.run(lambda tx: tx.pending_channel_keys("f1", "replies")) == [
        "zeta",
        "alpha",
        "mid",
    ]
    alpha = store.run(lambda tx: tx.pending_messages("f1", "replies", "alpha"))
    store.run(lambda tx: tx.consume_messages([alpha[0].seq]))
    assert store.run(lambda tx: tx.pending_channel_keys("f1", "replies")) == ["zeta", "mid"]
    assert store.run(lambda tx: tx.pending_channel_keys("f1", "nothing")) == []


def test_only_an_unconsumed_message_of_the_flow_can_be_deleted(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> list[int]:
        return [tx.append_message("f1", "inbox", "", f"m{n}", "1", at(n)) for n in range(3)]

    seqs = store.run(append)
    store.run(lambda tx: tx.consume_messages([seqs[0]]))
    assert store.run(lambda tx: tx.delete_message("f1", "m0")) is False
    assert store.run(lambda tx: tx.delete_message("f2", "m1")) is False
    assert store.run(lambda tx: tx.delete_message("f1", "unknown")) is False
    assert store.run(lambda tx: tx.delete_message("f1", "m1")) is True
    assert store.run(lambda tx: tx.delete_message("f1", "m1")) is False
    pending = store.run(lambda tx: tx.pending_messages("f1", "inbox", ""))
    assert [m.message_id for m in pending] == ["m2"]
    new_seq = store.run(lambda tx: tx.append_message("f1", "inbox", "", "m1", "2", at(5)))
    assert new_seq > seqs[2]


# Step executions


def test_executions_get_store_ids_and_are_read_and_updated(store: FlowStore) -> None:
    first, second = execution(), execution(step_type="Other", status=ExecutionStatus.WAITING)
    ids = add_executions(store, first, second)
    assert ids[0] < ids[1]
    assert (first.id, second.id) == tuple(ids)
    assert store.run(lambda tx: tx.get_execution(ids[0])) == first
    changed = replace(
        first,
        status=ExecutionStatus.RUNNING,
        options='{"o": 1}',
        attempt=2,
        attempt_started=True,
        cancel_requested=True,
        lease_owner="w1",
        lease_expires_at=at(30),
        checkpoint="cp",
        final_event="completed",
    )
    store.run(lambda tx: tx.update_execution(changed))
    got = store.run(lambda tx: tx.get_execution(ids[0]))
    assert got == changed
    assert got is not None
    assert got.attempt_started is True
    assert got.status is ExecutionStatus.RUNNING
    assert store.run(lambda tx: tx.get_execution(9999)) is None
    with pytest.raises(LookupError, match="no Step execution with store ID 9999 is stored"):
        store.run(lambda tx: tx.update_execution(replace(first, id=9999)))


def test_flow_executions_come_oldest_first_and_filter_by_status(store: FlowStore) -> None:
    ids = add_executions(
        store,
        execution("f1", status=ExecutionStatus.COMPLETED),
        execution("f2"),
        execution("f1", status=ExecutionStatus.WAITING),
        execution("f1", status=ExecutionStatus.READY),
    )
    every = store.run(lambda tx: tx.flow_executions("f1"))
    assert [row.id for row in every] == [ids[0], ids[2], ids[3]]
    active = store.run(
        lambda tx: tx.flow_executions("f1", [ExecutionStatus.READY, ExecutionStatus.WAITING])
    )
    assert [row.id for row in active] == [ids[2], ids[3]]
    assert store.run(lambda tx: tx.flow_executions("f1", [])) == []


def test_claimable_executions_filter_order_and_limit(store: FlowStore) -> None:
    add_flows(store, flow("run"), flow("stopped", FlowStatus.STOPPED))
    ids = add_executions(
        store,
        execution("run", status=ExecutionStatus.READY),  # 0 claimable
        execution("run", status=ExecutionStatus.WAITING),  # 1 not a claimable status
        execution("stopped", status=ExecutionStatus.READY),  # 2 its Flow is not running
        execution("run", status=ExecutionStatus.PENDING_WAIT),  # 3 claimable
        execution("run", status=ExecutionStatus.READY, not_before=at(10)),  # 4 due at 10
        execution("run", status=ExecutionStatus.READY, not_before=at(11)),  # 5 due at 11
        execution("run", status=ExecutionStatus.RUNNING),  # 6 held
        execution("run", status=ExecutionStatus.COMPLETED),  # 7 final
        execution("missing-flow", status=ExecutionStatus.READY),  # 8 no Flow run
    )

    def claimable(now: datetime, limit: int) -> list[int]:
        return [row.id for row in store.run(lambda tx: tx.claimable_executions(now, limit))]

    assert claimable(at(0), 10) == [ids[0], ids[3]]
    assert claimable(at(10), 10) == [ids[0], ids[3], ids[4]]
    assert claimable(at(11), 10) == [ids[0], ids[3], ids[4], ids[5]]
    assert claimable(at(11), 2) == [ids[0], ids[3]]
    assert claimable(at(11), 0) == []
    with pytest.raises(ValueError, match="limit must be 0 or more, not -1"):
        claimable(at(0), -1)


def test_due_timers_expired_leases_and_leases_by_owner(store: FlowStore) -> None:
    add_flows(store, flow("f1"))
    waiting, running = ExecutionStatus.WAITING, ExecutionStatus.RUNNING
    ids = add_executions(
        store,
        execution(status=waiting, timer_at=at(5)),  # 0
        execution(status=waiting, timer_at=at(9)),  # 1
        execution(status=waiting),  # 2 waits on a Channel only
        execution(status=ExecutionStatus.READY, timer_at=at(1)),  # 3 not waiting
        execution(status=running, lease_owner="w1", lease_expires_at=at(5)),  # 4
        execution(status=running, lease_owner="w2", lease_expires_at=at(7)),  # 5
        execution(status=ExecutionStatus.COMPLETED, lease_owner="w1", lease_expires_at=at(1)),
        execution(status=running, lease_owner="w1", lease_expires_at=at(8)),  # 7
    )

    def due(now: datetime) -> list[int]:
        return [row.id for row in store.run(lambda tx: tx.due_timer_executions(now))]

    def expired(now: datetime) -> list[int]:
        return [row.id for row in store.run(lambda tx: tx.expired_lease_executions(now))]

    def leased(owner: str) -> list[int]:
        return [row.id for row in store.run(lambda tx: tx.leased_executions(owner))]

    assert due(at(4)) == []
    assert due(at(5)) == [ids[0]]
    assert due(at(9)) == [ids[0], ids[1]]
    assert expired(at(5)) == []  # a lease expires strictly before now
    assert expired(at(7.5)) == [ids[4], ids[5]]
    assert leased("w1") == [ids[4], ids[7]]
    assert leased("w3") == []


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], None),
        ([execution(status=ExecutionStatus.WAITING, timer_at=at(7))], at(7)),
        ([execution(status=ExecutionStatus.READY, not_before=at(3))], at(3)),
        ([execution(status=ExecutionStatus.PENDING_WAIT, not_before=at(4))], at(4)),
        (
            [
                execution(status=ExecutionStatus.WAITING, timer_at=at(7)),
                execution(status=ExecutionStatus.READY, not_before=at(3)),
            ],
            at(3),
        ),
        ([execution(status=ExecutionStatus.RUNNING, timer_at=at(1), not_before=at(1))], None),
        ([execution(status=ExecutionStatus.WAITING, not_before=at(1))], None),
        ([execution("stopped", status=ExecutionStatus.READY, not_before=at(1))], None),
        ([execution("stopped", status=ExecutionStatus.WAITING, timer_at=at(2))], at(2)),
    ],
)
def test_next_timer_at(store: FlowStore, rows: list[ExecutionRow], expected: datetime) -> None:
    add_flows(store, flow("f1"), flow("stopped", FlowStatus.STOPPED))
    add_executions(store, *(replace(row) for row in rows))
    assert store.run(lambda tx: tx.next_timer_at()) == expected


def test_step_numbers_count_per_flow_and_step_type(store: FlowStore) -> None:
    def number(flow_id: str, step_type: str) -> int:
        return store.run(lambda tx: tx.next_step_number(flow_id, step_type))

    assert [number("f1", "A"), number("f1", "A"), number("f1", "B")] == [1, 2, 1]
    assert [number("f2", "A"), number("f1", "A")] == [1, 3]


# Locks


def test_locks_are_held_per_flow_and_released_per_execution(store: FlowStore) -> None:
    def take(tx: StoreTransaction) -> None:
        tx.acquire_lock("f1", "notes", 1)
        tx.acquire_lock("f1", "notes", 1)  # the holder taking it again changes nothing
        tx.acquire_lock("f1", "tasks/a", 1)
        tx.acquire_lock("f2", "notes", 2)

    store.run(take)
    assert store.run(lambda tx: tx.lock_holder("f1", "notes")) == 1
    assert store.run(lambda tx: tx.lock_holder("f1", "other")) is None
    with pytest.raises(
        ValueError, match="lock 'notes' of Flow run 'f1' is held by Step execution 1"
    ):
        store.run(lambda tx: tx.acquire_lock("f1", "notes", 3))
    store.run(lambda tx: tx.release_locks(1))
    holders = store.run(
        lambda tx: [
            tx.lock_holder(*key) for key in [("f1", "notes"), ("f1", "tasks/a"), ("f2", "notes")]
        ]
    )
    assert holders == [None, None, 2]


# Stream events


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
    assert [e.id for e in store.run(lambda tx: tx.events_after("f2", 0, 10))] == [ids[4]]
    assert store.run(lambda tx: tx.get_event(ids[2])) is not None
    assert store.run(lambda tx: tx.trim_events("Agent", 20)) == 0
    assert store.run(lambda tx: tx.trim_events("Agent", 0)) == 2
    later = store.run(lambda tx: tx.append_event("Agent", "f1", "1", "s", at(5)))
    assert later > ids[4]
    assert store.run(lambda tx: tx.trim_events("Agent", 1)) == 0
    with pytest.raises(ValueError, match="capacity_bytes must be 0 or more, not -1"):
        store.run(lambda tx: tx.trim_events("Agent", -1))


# Copies, atomicity, serialization, change counter


def test_rows_are_copies(store: FlowStore) -> None:
    inserted = flow("f1")
    add_flows(store, inserted)
    row = execution("f1", status=ExecutionStatus.READY)
    add_executions(store, row)
    inserted.status = FlowStatus.FAILED
    row.attempt = 99

    def mutate_what_was_read(tx: StoreTransaction) -> None:
        readings = [
            tx.get_flow("f1"),
            tx.get_execution(row.id),
            *tx.list_flows(),
            *tx.flow_executions("f1"),
            *tx.claimable_executions(at(0), 10),
        ]
        for reading in readings:
            assert reading is not None
            reading.input = "changed"

    store.run(mutate_what_was_read)
    got_flow = store.run(lambda tx: tx.get_flow("f1"))
    got_execution = store.run(lambda tx: tx.get_execution(row.id))
    assert got_flow == flow("f1")
    assert got_execution == replace(row, attempt=1)


def snapshot(tx: StoreTransaction) -> dict[str, object]:
    return {
        "flows": tx.list_flows(),
        "values": tx.get_values("f1", "map"),
        "singleton": tx.get_value("f1", "one", ""),
        "messages": tx.pending_messages("f1", "inbox", ""),
        "executions": tx.flow_executions("f1"),
        "lock": tx.lock_holder("f1", "notes"),
        "events": tx.events_after("f1", 0, 100),
        "next_timer": tx.next_timer_at(),
    }


def test_a_raising_transaction_leaves_nothing_of_its_writes(store: FlowStore) -> None:
    def committed(tx: StoreTransaction) -> None:
        tx.insert_flow(flow("f1"))
        tx.put_value("f1", "map", "a", "1")
        tx.put_value("f1", "one", "", "1")
        tx.append_message("f1", "inbox", "", "m1", "1", at(1))
        tx.insert_execution(execution(status=ExecutionStatus.WAITING, timer_at=at(9)))
        tx.acquire_lock("f1", "notes", 1)
        for n in range(3):
            tx.append_event("Agent", "f1", "12345", "s", at(n))

    store.run(committed)
    before = store.run(snapshot)
    counter = store.change_counter()

    def failing(tx: StoreTransaction) -> None:
        tx.insert_flow(flow("f0", created=-1))
        tx.update_flow(replace(flow("f1"), status=FlowStatus.COMPLETED))
        tx.put_value("f1", "map", "a", "2")
        tx.put_value("f1", "map", "b", "3")
        tx.delete_value("f1", "one", "")
        message = tx.pending_messages("f1", "inbox", "")[0]
        tx.consume_messages([message.seq])
        tx.append_message("f1", "inbox", "", "m2", "2", at(2))
        row = tx.flow_executions("f1")[0]
        tx.update_execution(replace(row, status=ExecutionStatus.COMPLETED, timer_at=None))
        tx.insert_execution(execution(status=ExecutionStatus.READY, not_before=at(2)))
        assert tx.next_step_number("f1", "Step") == 1
        tx.release_locks(1)
        tx.acquire_lock("f1", "other", 2)
        tx.append_event("Agent", "f1", "12345", "s", at(5))
        assert tx.trim_events("Agent", 5) == 3
        assert snapshot(tx) != before  # reads see this transaction's writes
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.run(failing)
    assert store.change_counter() == counter
    assert store.run(snapshot) == before
    assert store.run(lambda tx: tx.lock_holder("f1", "other")) is None
    assert store.run(lambda tx: tx.next_step_number("f1", "Step")) == 1
    assert store.run(lambda tx: tx.append_message("f1", "inbox", "", "m2", "2", at(2))) > 0
    assert store.run(lambda tx: tx.trim_events("Agent", 5)) == 2


def test_transactions_are_serialized_across_threads(store: FlowStore) -> None:
    store.run(lambda tx: tx.put_value("f1", "count", "", "0"))

    def increment(tx: StoreTransaction) -> None:
        tx.put_value("f1", "count", "", str(int(tx.get_value("f1", "count", "") or "0") + 1))

    def worker() -> None:
        for _ in range(200):
            store.run(increment)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.run(lambda tx: tx.get_value("f1", "count", "")) == "400"


def test_change_counter_changes_on_a_write_and_not_on_a_read(store: FlowStore) -> None:
    start = store.change_counter()
    store.run(lambda tx: tx.get_flow("f1"))
    assert store.change_counter() == start
    add_flows(store, flow("f1"))
    after_write = store.change_counter()
    assert after_write != start

    def write_then_fail(tx: StoreTransaction) -> None:
        tx.put_value("f1", "a", "", "1")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.run(write_then_fail)
    assert store.change_counter() == after_write


def test_a_transaction_is_usable_only_inside_its_work(store: FlowStore) -> None:
    kept = store.run(lambda tx: tx)
    with pytest.raises(RuntimeError, match="this store transaction has ended"):
        kept.get_flow("f1")
    with pytest.raises(RuntimeError, match="cannot run inside another transaction's work"):
        store.run(lambda tx: store.run(lambda inner: inner.get_flow("f1")))
    store.close()
    with pytest.raises(RuntimeError, match="is closed"):
        store.run(lambda tx: tx.get_flow("f1"))


# SQLite only


def test_sqlite_data_survives_a_fresh_store_on_the_same_path(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    first = SqliteFlowStore(path)
    add_flows(first, flow("f1"))
    event = first.run(lambda tx: tx.append_event("Agent", "f1", "1", "s", at(1)))
    first.close()
    second = SqliteFlowStore(str(path))
    assert second.run(lambda tx: tx.get_flow("f1")) == flow("f1")
    assert second.run(lambda tx: tx.append_event("Agent", "f1", "2", "s", at(2))) == event + 1
    second.close()


def test_sqlite_sees_commits_of_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    one, two = SqliteFlowStore(path), SqliteFlowStore(path)
    try:
        before = one.change_counter()
        add_flows(two, flow("f1"))
        assert one.change_counter() != before
        assert one.run(lambda tx: tx.get_flow("f1")) == flow("f1")
    finally:
        one.close()
        two.close()


WRITER = """
import sys
from datetime import UTC, datetime
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore

store = SqliteFlowStore(sys.argv[1])
n = 0
while True:
    n += 1
    def work(tx, n=n):
        tx.put_value("f1", "count", "", str(n))
        tx.append_event("Agent", "f1", str(n), "writer", datetime.now(UTC))
    store.run(work)
"""


def test_sqlite_a_killed_writer_leaves_whole_transactions(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    reader = SqliteFlowStore(path)
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    try:
        for _ in range(1000):
            if int(reader.read(lambda tx: tx.get_value("f1", "count", "")) or "0") >= 20:
                break
            child_exit = child.poll()
            assert child_exit is None, f"the writer exited with {child_exit}"
            threading.Event().wait(0.01)
    finally:
        child.kill()
        child.wait()
    reader.close()
    fresh = SqliteFlowStore(path)
    count = int(fresh.run(lambda tx: tx.get_value("f1", "count", "")) or "0")
    events = fresh.run(lambda tx: tx.events_after("f1", 0, 1_000_000))
    fresh.close()
    assert count >= 20
    assert [event.value for event in events] == [str(n) for n in range(1, count + 1)]
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    connection.close()


def test_sqlite_runs_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")
    connection = store._connection  # the store's own connection: synchronous is per connection
    assert connection is not None
    pragmas = [
        connection.execute(f"PRAGMA {name}").fetchone()[0]
        for name in ("journal_mode", "synchronous", "user_version")
    ]
    store.close()
    assert pragmas == ["wal", 2, SCHEMA_VERSION]


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are not the pages you are looking for" * 100)
    with pytest.raises(
        StoreCorruptError, match=re.escape(f"{path} is not a usable dex-agents flow store")
    ):
        SqliteFlowStore(path)


def test_sqlite_refuses_a_foreign_database(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE mine (x)")
    connection.close()
    with pytest.raises(
        StoreCorruptError, match="is an SQLite database but not a dex-agents flow store"
    ):
        SqliteFlowStore(path)


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    SqliteFlowStore(path).close()
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    connection.close()
    with pytest.raises(StoreVersionError) as raised:
        SqliteFlowStore(path)
    assert str(raised.value) == (
        f"the flow store {path} has schema version {SCHEMA_VERSION + 1}, newer than "
        f"{SCHEMA_VERSION}, the newest this dex-agents reads; upgrade dex-agents"
    )


def test_sqlite_reports_a_lock_held_past_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    holder, waiter = SqliteFlowStore(path), SqliteFlowStore(path, busy_timeout=timedelta(0))
    holding, release = threading.Event(), threading.Event()

    def hold(tx: StoreTransaction) -> None:
        holding.set()
        release.wait()

    thread = threading.Thread(target=holder.run, args=(hold,))
    thread.start()
    try:
        holding.wait()
        with pytest.raises(StoreBusyError) as raised:
            waiter.run(lambda tx: tx.get_flow("f1"))
    finally:
        release.set()
        thread.join()
    assert isinstance(raised.value, EngineError)
    assert raised.value.retryable is True
    assert str(raised.value) == (
        f"the flow store {path} stayed locked by another connection for longer than "
        "the busy timeout (0 s); retry later"
    )
    assert waiter.run(lambda tx: tx.get_flow("f1")) is None
    holder.close()
    waiter.close()


@pytest.mark.parametrize("path", ["", ":memory:", "file:flows?mode=memory"])
def test_sqlite_needs_a_file_path(path: str) -> None:
    with pytest.raises(ValueError, match="SqliteFlowStore needs a file path"):
        SqliteFlowStore(path)


def test_sqlite_names_a_path_it_cannot_open(tmp_path: Path) -> None:
    path = tmp_path / "no-such-directory" / "flows.sqlite3"
    with pytest.raises(StoreError) as raised:
        SqliteFlowStore(path)
    assert str(raised.value) == f"cannot open the flow store {path}: unable to open database file"


# Both stores give the same results for any sequence of transactions

FLOW_IDS = ("f1", "f2")
STATUSES = tuple(ExecutionStatus)
times = st.integers(min_value=0, max_value=6).map(at)
optional_times = st.none() | times

operations = st.one_of(
    st.tuples(st.just("insert_flow"), st.sampled_from(FLOW_IDS), st.sampled_from(FlowStatus)),
    st.tuples(st.just("update_flow"), st.sampled_from(FLOW_IDS), st.sampled_from(FlowStatus)),
    st.tuples(st.just("put_value"), st.sampled_from(FLOW_IDS), st.sampled_from(("", "k1", "k2"))),
    st.tuples(
        st.just("delete_value"), st.sampled_from(FLOW_IDS), st.sampled_from(("", "k1", "k2"))
    ),
    st.tuples(
        st.just("append_message"),
        st.sampled_from(FLOW_IDS),
        st.sampled_from(("", "k1", "k2")),
        st.sampled_from(("m1", "m2", "m3", "m4")),
        times,
    ),
    st.tuples(
        st.just("consume"),
        st.sampled_from(FLOW_IDS),
        st.sampled_from(("", "k1", "k2")),
        st.integers(min_value=1, max_value=2),
    ),
    st.tuples(st.just("delete_message"), st.sampled_from(FLOW_IDS), st.sampled_from(("m1", "m2"))),
    st.tuples(
        st.just("insert_execution"),
        st.sampled_from(FLOW_IDS),
        st.sampled_from(STATUSES),
        optional_times,
        optional_times,
        st.sampled_from((None, "w1", "w2")),
    ),
    st.tuples(
        st.just("update_execution"),
        st.integers(min_value=1, max_value=6),
        st.sampled_from(STATUSES),
        optional_times,
        optional_times,
    ),
    st.tuples(st.just("next_step_number"), st.sampled_from(FLOW_IDS), st.sampled_from("AB")),
    st.tuples(
        st.just("acquire_lock"),
        st.sampled_from(FLOW_IDS),
        st.sampled_from(("n1", "n2")),
        st.integers(min_value=1, max_value=3),
    ),
    st.tuples(st.just("release_locks"), st.integers(min_value=1, max_value=3)),
    st.tuples(
        st.just("append_event"),
        st.sampled_from(("T1", "T2")),
        st.sampled_from(FLOW_IDS),
        st.text(alphabet="aé", max_size=4),
    ),
    st.tuples(
        st.just("trim_events"), st.sampled_from(("T1", "T2")), st.integers(min_value=0, max_value=8)
    ),
)


def apply(tx: StoreTransaction, operation: tuple[Any, ...]) -> object:
    name, *args = operation
    if name in ("insert_flow", "update_flow"):
        return getattr(tx, name)(flow(args[0], args[1]))
    if name == "put_value":
        tx.put_value(args[0], "attr", args[1], f'"{args[1]}"')
        return None
    if name == "delete_value":
        tx.delete_value(args[0], "attr", args[1])
        return None
    if name == "append_message":
        return tx.append_message(args[0], "ch", args[1], args[2], "1", args[3])
    if name == "consume":
        seqs = [row.seq for row in tx.pending_messages(args[0], "ch", args[1])[: args[2]]]
        tx.consume_messages(seqs)
        return seqs
    if name == "insert_execution":
        flow_id, status, not_before, timer_at, owner = args
        row = execution(flow_id, status=status, not_before=not_before, timer_at=timer_at)
        return tx.insert_execution(replace(row, lease_owner=owner, lease_expires_at=timer_at))
    if name == "update_execution":
        execution_id, status, not_before, timer_at = args
        old = tx.get_execution(execution_id) or replace(execution(), id=execution_id)
        tx.update_execution(replace(old, status=status, not_before=not_before, timer_at=timer_at))
        return None
    if name == "append_event":
        flow_type, flow_id, value = args
        return tx.append_event(flow_type, flow_id, value, "source", at(len(value)))
    return getattr(tx, name)(*args)


def everything(tx: StoreTransaction) -> dict[str, object]:
    keys = ("", "k1", "k2")
    return {
        "flows": tx.list_flows(),
        "values": [tx.get_values(f, "attr") for f in FLOW_IDS],
        "value": [tx.get_value(f, "attr", "") for f in FLOW_IDS],
        "pending": [tx.pending_messages(f, "ch", k) for f in FLOW_IDS for k in keys],
        "keys": [tx.pending_channel_keys(f, "ch") for f in FLOW_IDS],
        "executions": [tx.flow_executions(f) for f in FLOW_IDS],
        "claimable": [tx.claimable_executions(at(n), 3) for n in (0, 3, 6)],
        "timers": [tx.due_timer_executions(at(n)) for n in (0, 3, 6)],
        "leases": [tx.expired_lease_executions(at(n)) for n in (0, 3, 6)],
        "leased": [tx.leased_executions(owner) for owner in ("w1", "w2")],
        "next_timer_at": tx.next_timer_at(),
        "locks": [tx.lock_holder(f, n) for f in FLOW_IDS for n in ("n1", "n2")],
        "events": [tx.events_after(f, 0, 100) for f in FLOW_IDS],
        "event": [tx.get_event(n) for n in range(1, 8)],
    }


def outcome(store: FlowStore, work: Callable[[StoreTransaction], object]) -> object:
    try:
        return store.run(work)
    except (ValueError, LookupError, RuntimeError) as error:
        return (type(error), str(error))


@settings(max_examples=60, deadline=None)
@given(
    transactions=st.lists(
        st.tuples(st.lists(operations, min_size=1, max_size=5), st.booleans()), max_size=6
    )
)
def test_both_stores_give_the_same_results(
    transactions: list[tuple[list[tuple[Any, ...]], bool]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        stores = (SqliteFlowStore(Path(directory) / "flows.sqlite3"), MemoryFlowStore())
        try:
            for ops, fails in transactions:

                def work(
                    tx: StoreTransaction, ops: list[tuple[Any, ...]] = ops, fails: bool = fails
                ) -> object:
                    results = [outcome_in(tx, op) for op in ops]
                    if fails:
                        raise RuntimeError("rolled back")
                    return results

                sqlite_result, memory_result = (outcome(s, work) for s in stores)
                assert sqlite_result == memory_result
                assert stores[0].run(everything) == stores[1].run(everything)
        finally:
            for store in stores:
                store.close()


def outcome_in(tx: StoreTransaction, operation: tuple[Any, ...]) -> object:
    try:
        return apply(tx, operation)
    except (ValueError, LookupError) as error:
        return (type(error), str(error))


def test_a_read_sees_committed_values_and_refuses_writes(store: FlowStore) -> None:
    store.run(lambda tx: tx.put_value("f1", "a", "", "1"))
    counter = store.change_counter()
    assert store.read(lambda tx: tx.get_value("f1", "a", "")) == "1"
    assert store.change_counter() == counter
    with pytest.raises(Exception, match=r"(?i)read|readonly|write"):
        store.read(lambda tx: tx.put_value("f1", "a", "", "2"))
    assert store.read(lambda tx: tx.get_value("f1", "a", "")) == "1"
    # The store still takes writes after a refused one.
    store.run(lambda tx: tx.put_value("f1", "a", "", "3"))
    assert store.read(lambda tx: tx.get_value("f1", "a", "")) == "3"


def test_sqlite_a_read_does_not_wait_for_another_connections_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    writer = SqliteFlowStore(path)
    reader = SqliteFlowStore(path, busy_timeout=timedelta(milliseconds=100))
    writer.run(lambda tx: tx.put_value("f1", "a", "", "1"))
    holding = threading.Event()
    release = threading.Event()

    def hold(tx: StoreTransaction) -> None:
        tx.put_value("f1", "a", "", "2")
        holding.set()
        release.wait(5)

    thread = threading.Thread(target=lambda: writer.run(hold))
    thread.start()
    try:
        assert holding.wait(5)
        # The writer holds the write lock with an uncommitted change: the reader sees the
        # last committed snapshot at once instead of timing out.
        assert reader.read(lambda tx: tx.get_value("f1", "a", "")) == "1"
    finally:
        release.set()
        thread.join()
    assert reader.read(lambda tx: tx.get_value("f1", "a", "")) == "2"
    reader.close()
    writer.close()
