"""The ``FlowStore`` contract: Step executions, Step numbers and locks.

Each test runs on both stores (the ``store`` fixture of conftest.py), which must give
the same results.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import add_executions, at, execution

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


def test_pruning_keeps_a_flows_newest_finished_executions_and_every_active_one(
    store: FlowStore,
) -> None:
    finals = [ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED]
    rows = []
    for n in range(9):
        rows.append(execution("f1", status=finals[n % 3]))
        if n % 4 == 0:
            rows.append(execution("f1", status=ExecutionStatus.WAITING))
    rows.append(execution("f2", status=ExecutionStatus.COMPLETED))
    ids = add_executions(store, *rows)
    finished = [row.id for row in rows if row.flow_id == "f1" and row.status.is_final]
    active = [row.id for row in rows if not row.status.is_final]
    assert store.run(lambda tx: tx.prune_finished_executions("f1", 4)) == 5
    kept = [row.id for row in store.run(lambda tx: tx.flow_executions("f1"))]
    assert kept == sorted(active + finished[-4:])
    assert store.run(lambda tx: tx.get_execution(finished[0])) is None
    assert store.run(lambda tx: tx.prune_finished_executions("f1", 4)) == 0
    assert store.run(lambda tx: tx.prune_finished_executions("f1", 100)) == 0
    assert [row.id for row in store.run(lambda tx: tx.flow_executions("f2"))] == [ids[-1]]
    with pytest.raises(ValueError, match="keep must be at least 1, not 0"):
        store.run(lambda tx: tx.prune_finished_executions("f1", 0))


def test_last_step_activity_is_the_latest_creation_or_finish_of_the_flows_executions(
    store: FlowStore,
) -> None:
    # Times that differ only in their microseconds, or that cross a second, must order as
    # times: the SQLite store compares their stored text.
    add_executions(
        store,
        execution("f1", created_at=at(1), finished_at=at(2.000001)),
        execution("f1", created_at=at(2), status=ExecutionStatus.WAITING),
        execution("f2", created_at=at(50)),
        execution("f3", created_at=at(3), finished_at=at(9.5)),
        execution("f3", created_at=at(10)),
    )
    assert store.read(lambda tx: tx.last_step_activity("f1")) == at(2.000001)
    assert store.read(lambda tx: tx.last_step_activity("f3")) == at(10)
    assert store.read(lambda tx: tx.last_step_activity("none")) is None

    def finished_later(tx: StoreTransaction) -> tuple[object, object]:
        # The transaction's own writes count, the SQLite store's kept ones too.
        (row,) = tx.flow_executions("f1", [ExecutionStatus.WAITING])
        tx.update_execution(replace(row, finished_at=at(30), status=ExecutionStatus.COMPLETED))
        tx.insert_execution(execution("f4", created_at=at(40)))
        return tx.last_step_activity("f1"), tx.last_step_activity("f4")

    assert store.run(finished_later) == (at(30), at(40))
    assert store.read(lambda tx: tx.last_step_activity("f1")) == at(30)


def test_updates_after_a_read_in_one_transaction_store_every_change(store: FlowStore) -> None:
    (row_id,) = add_executions(store, execution(input='{"n": 1}'))

    def update_twice(tx: StoreTransaction) -> None:
        row = tx.get_execution(row_id)
        assert row is not None
        tx.update_execution(replace(row, status=ExecutionStatus.RUNNING, lease_owner="w1"))
        # Against the first update, not the row as read.
        tx.update_execution(replace(row, status=ExecutionStatus.RUNNING, attempt=2))
        tx.update_execution(replace(row, status=ExecutionStatus.RUNNING, attempt=2))

    store.run(update_twice)
    got = store.run(lambda tx: tx.get_execution(row_id))
    assert got is not None
    assert (got.status, got.lease_owner, got.attempt) == (ExecutionStatus.RUNNING, None, 2)
    assert got.input == '{"n": 1}'


def test_an_update_after_a_rolled_back_work_of_a_batch_is_stored(store: FlowStore) -> None:
    (row_id,) = add_executions(store, execution())
    before = store.run(lambda tx: tx.get_execution(row_id))
    assert before is not None
    retried = replace(before, attempt=2)

    def fails(tx: StoreTransaction) -> None:
        row = tx.get_execution(row_id)
        assert row is not None
        tx.update_execution(replace(row, attempt=2))
        raise ValueError("undone")

    outcomes = store.run_batch([fails, lambda tx: tx.update_execution(retried)])
    assert isinstance(outcomes[0].error, ValueError)
    assert outcomes[1].error is None
    got = store.run(lambda tx: tx.get_execution(row_id))
    assert got is not None
    assert got.attempt == 2


def test_an_execution_pruned_in_the_transaction_cannot_be_updated(store: FlowStore) -> None:
    ids = add_executions(store, *(execution(status=ExecutionStatus.COMPLETED) for _ in range(2)))

    def prune_then_update(tx: StoreTransaction) -> None:
        old = tx.get_execution(ids[0])
        assert old is not None
        assert tx.prune_finished_executions("f1", 1) == 1
        tx.update_execution(old)

    with pytest.raises(LookupError, match="no Step execution with store ID"):
        store.run(prune_then_update)


@pytest.mark.parametrize("read_first", [True, False])
def test_an_execution_stays_in_the_flow_run_that_created_it(
    store: FlowStore, read_first: bool
) -> None:
    # Read first or not, an update that names another run is refused and changes nothing:
    # what a store keeps of a run's active Steps must never hold another run's.
    (row_id,) = add_executions(store, execution())
    stored = store.run(lambda tx: tx.get_execution(row_id))
    assert stored is not None
    moved = replace(stored, flow_id="f2", status=ExecutionStatus.RUNNING)

    def move(tx: StoreTransaction) -> None:
        if read_first:
            tx.get_execution(row_id)
        tx.update_execution(moved)

    message = (
        f"Step execution {row_id} belongs to Flow run 'f1'; update_execution cannot move it to 'f2'"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        store.run(move)
    assert store.run(lambda tx: tx.get_execution(row_id)) == stored
    active = [ExecutionStatus.READY, ExecutionStatus.RUNNING]
    assert [row.id for row in store.run(lambda tx: tx.flow_executions("f1", active))] == [row_id]
    assert store.run(lambda tx: tx.flow_executions("f2")) == []


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
