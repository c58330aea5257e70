"""The ``FlowStore`` contract: copies, atomicity, serialization, reads, the change counter.

Each test runs on both stores (the ``store`` fixture of conftest.py), which must give
the same results.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from dex_agents.ports.flow_rows import ExecutionStatus, FlowStatus
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import add_executions, add_flows, at, execution, flow


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
    # Writes and the Stream too, not only the first read.
    with pytest.raises(RuntimeError, match="this store transaction has ended"):
        kept.put_value("f1", "a", "", "1")
    with pytest.raises(RuntimeError, match="this store transaction has ended"):
        kept.flow_executions("f1")
    with pytest.raises(RuntimeError, match="ended"):
        kept.last_event_id("f1")
    with pytest.raises(RuntimeError, match="cannot run inside another transaction's work"):
        store.run(lambda tx: store.run(lambda inner: inner.get_flow("f1")))
    store.close()
    with pytest.raises(RuntimeError, match="is closed"):
        store.run(lambda tx: tx.get_flow("f1"))


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
