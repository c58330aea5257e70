"""A Step execution's INSERT waits for the end of the transaction that creates it.

Most Steps are claimed, put to wait or run in the commit that creates them, so
``SqliteTransaction`` keeps a new execution's values until the commit (or the
first statement that reads ``step_executions``) and writes it once, as it then
is. The ID it hands out before the row is written is one past the last this
connection inserted, which is what ``AUTOINCREMENT`` gives while no other
connection inserts; after another connection commits, or a rollback, the next
insert runs at once and learns it again.

An update of a row the transaction read or wrote waits the same way, merged
with the updates after it: a Step run in a commit goes from ready to running
and finished in it, in one UPDATE. Neither is written when a savepoint begins;
a rollback to the savepoint brings back what was unwritten when it began.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import T0, add_executions, at, execution
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements

R = TypeVar("R")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteFlowStore]:
    with sqlite_store_with_a_flow(tmp_path) as store:
        add_executions(store, execution(step_execution_id="Step-0"))  # the next ID is known
        yield store


def _claimed_in_its_own_commit(tx: StoreTransaction, step_execution_id: str) -> int:
    row = execution(step_execution_id=step_execution_id)
    tx.insert_execution(row)
    row.status = ExecutionStatus.RUNNING
    row.lease_owner = "worker-1"
    row.lease_expires_at = at(30)
    tx.update_execution(row)
    return row.id


def _fails_after_a_claim(tx: StoreTransaction) -> None:
    _claimed_in_its_own_commit(tx, "Lost-1")
    raise ValueError("this work fails")


def _stored(path: Path) -> list[tuple[int, str, str, str | None]]:
    # Another connection, so nothing this store keeps answers for the file.
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT id, step_execution_id, status, lease_owner FROM step_executions ORDER BY id"
        ).fetchall()
    connection.close()
    return [(int(a), str(b), str(c), d) for a, b, c, d in rows]


def _run_traced(
    store: SqliteFlowStore, work: Callable[[StoreTransaction], R]
) -> tuple[R, list[str]]:
    """``store.run(work)``'s result, and the statements it wrote ``step_executions`` with, each
    cut to its verb and table."""
    with traced_statements(store) as statements:
        result = store.run(work)
    writes = [
        sql.split("(")[0].split(" SET")[0]
        for sql in statements
        if "step_executions" in sql and not sql.startswith("SELECT")
    ]
    return result, writes


def test_an_execution_claimed_in_the_commit_that_creates_it_is_written_once(
    store: SqliteFlowStore,
) -> None:
    new_id, writes = _run_traced(store, lambda tx: _claimed_in_its_own_commit(tx, "Step-1"))
    assert writes == ["INSERT INTO step_executions "]
    assert _stored(store.path)[-1] == (new_id, "Step-1", "running", "worker-1")
    read = store.read(lambda tx: tx.get_execution(new_id))
    assert read is not None
    assert read.lease_owner == "worker-1"


def test_a_statement_that_reads_executions_sees_the_unwritten_ones(
    store: SqliteFlowStore,
) -> None:
    def work(tx: StoreTransaction) -> list[tuple[int, ExecutionStatus]]:
        new_id = _claimed_in_its_own_commit(tx, "Step-1")
        # Every execution of the run, finished ones too: a query of the table, not the kept rows.
        listed = [(row.id, row.status) for row in tx.flow_executions("f1")]
        assert (new_id, ExecutionStatus.RUNNING) in listed
        return listed

    assert [status for _, status in store.run(work)] == [
        ExecutionStatus.READY,
        ExecutionStatus.RUNNING,
    ]


def test_an_insert_after_another_connection_inserted_gets_a_new_id(
    store: SqliteFlowStore,
) -> None:
    other = SqliteFlowStore(store.path)
    try:
        (others,) = add_executions(other, execution(step_execution_id="Other-1"))
    finally:
        other.close()
    mine = store.run(lambda tx: _claimed_in_its_own_commit(tx, "Step-1"))
    then = store.run(lambda tx: _claimed_in_its_own_commit(tx, "Step-2"))
    assert mine > others
    assert then == mine + 1
    assert [row[1] for row in _stored(store.path)] == ["Step-0", "Other-1", "Step-1", "Step-2"]


def test_a_work_rolled_back_to_its_savepoint_leaves_no_execution(
    store: SqliteFlowStore,
) -> None:
    outcomes = store.run_batch(
        [lambda tx: _claimed_in_its_own_commit(tx, "Step-1"), _fails_after_a_claim]
    )
    assert isinstance(outcomes[1].error, ValueError)
    kept_id = outcomes[0].value
    then = store.run(lambda tx: _claimed_in_its_own_commit(tx, "Step-2"))
    assert then > kept_id
    assert [row[1] for row in _stored(store.path)] == ["Step-0", "Step-1", "Step-2"]


def test_a_transaction_that_rolls_back_leaves_no_execution_and_the_next_insert_works(
    store: SqliteFlowStore,
) -> None:
    with pytest.raises(ValueError, match="this work fails"):
        store.run(_fails_after_a_claim)
    store.run(lambda tx: _claimed_in_its_own_commit(tx, "Step-1"))
    assert [row[1:] for row in _stored(store.path)] == [
        ("Step-0", "ready", None),
        ("Step-1", "running", "worker-1"),
    ]


def _ran(tx: StoreTransaction, execution_id: int) -> ExecutionRow:
    """Claim the stored execution ``execution_id`` as a claim does; return its row."""
    row = tx.get_execution(execution_id)
    assert row is not None
    row.status = ExecutionStatus.RUNNING
    row.first_attempt_at = at(1)
    row.lease_owner = "worker-1"
    row.lease_expires_at = at(30)
    tx.update_execution(row)
    return row


def _finished(tx: StoreTransaction, row: ExecutionRow) -> None:
    row.status = ExecutionStatus.COMPLETED
    row.lease_owner = None
    row.lease_expires_at = None
    row.finished_at = at(2)
    tx.update_execution(row)


def _fails(first: Callable[[], object]) -> Callable[[], None]:
    def work() -> None:
        first()
        raise ValueError("this work fails")

    return work


def _status(path: Path, execution_id: int) -> tuple[str, str | None]:
    rows = {row[0]: (row[2], row[3]) for row in _stored(path)}
    return rows[execution_id]


def _first_id(store: SqliteFlowStore) -> int:
    return store.read(lambda tx: tx.flow_executions("f1")[0].id)


def test_a_stored_execution_claimed_and_finished_in_one_commit_is_updated_once(
    store: SqliteFlowStore,
) -> None:
    execution_id = _first_id(store)

    def work(tx: StoreTransaction) -> None:
        _finished(tx, _ran(tx, execution_id))

    _, writes = _run_traced(store, work)
    assert writes == ["UPDATE step_executions"]
    assert _status(store.path, execution_id) == ("completed", None)
    read = store.read(lambda tx: tx.get_execution(execution_id))
    assert read is not None
    assert (read.first_attempt_at, read.finished_at) == (at(1), at(2))
    assert read.created_at == T0


def test_a_statement_that_reads_executions_sees_the_unwritten_updates(
    store: SqliteFlowStore,
) -> None:
    execution_id = _first_id(store)

    def work(tx: StoreTransaction) -> list[ExecutionStatus]:
        row = _ran(tx, execution_id)
        listed = [row.status for row in tx.flow_executions("f1")]  # a query of the table
        _finished(tx, row)
        return listed

    listed, writes = _run_traced(store, work)
    assert listed == [ExecutionStatus.RUNNING]
    assert writes == ["UPDATE step_executions"] * 2
    assert _status(store.path, execution_id) == ("completed", None)


def test_updates_before_and_in_a_savepoint_that_holds_are_one_update(
    store: SqliteFlowStore,
) -> None:
    execution_id = _first_id(store)

    def work(tx: StoreTransaction) -> None:
        row = _ran(tx, execution_id)
        assert tx.run_undoable(lambda: _finished(tx, row)).error is None

    _, writes = _run_traced(store, work)
    assert writes == ["UPDATE step_executions"]
    assert _status(store.path, execution_id) == ("completed", None)


@pytest.mark.parametrize("read_in_it", [False, True], ids=["nothing read", "a read wrote them"])
def test_a_savepoint_rolled_back_keeps_the_updates_from_before_it(
    store: SqliteFlowStore, read_in_it: bool
) -> None:
    execution_id = _first_id(store)

    def in_savepoint(tx: StoreTransaction, row: ExecutionRow) -> None:
        if read_in_it:  # the claim's UPDATE runs in the savepoint, and is rolled back with it
            tx.flow_executions("f1")
        _finished(tx, row)

    def work(tx: StoreTransaction) -> None:
        row = _ran(tx, execution_id)
        outcome = tx.run_undoable(_fails(lambda: in_savepoint(tx, row)))
        assert isinstance(outcome.error, ValueError)

    store.run(work)
    assert _status(store.path, execution_id) == ("running", "worker-1")


@pytest.mark.parametrize("read_in_it", [False, True], ids=["nothing read", "a read wrote it"])
def test_a_savepoint_rolled_back_keeps_the_insert_from_before_it(
    store: SqliteFlowStore, read_in_it: bool
) -> None:
    def in_savepoint(tx: StoreTransaction) -> None:
        if read_in_it:
            tx.flow_executions("f1")

    def work(tx: StoreTransaction) -> int:
        new_id = _claimed_in_its_own_commit(tx, "Step-1")
        outcome = tx.run_undoable(_fails(lambda: in_savepoint(tx)))
        assert isinstance(outcome.error, ValueError)
        return new_id

    new_id = store.run(work)
    assert _status(store.path, new_id) == ("running", "worker-1")
    then = store.run(lambda tx: _claimed_in_its_own_commit(tx, "Step-2"))
    assert then > new_id


def test_an_update_after_a_rolled_back_savepoint_lands_after_the_kept_one(
    store: SqliteFlowStore,
) -> None:
    execution_id = _first_id(store)

    def work(tx: StoreTransaction) -> None:
        row = _ran(tx, execution_id)
        tx.run_undoable(_fails(lambda: _finished(tx, row)))
        # What the transaction saw was forgotten with the rollback: this update writes anew.
        _finished(tx, row)

    store.run(work)
    assert _status(store.path, execution_id) == ("completed", None)


def test_a_read_that_updates_an_execution_it_read_is_refused_at_once(
    store: SqliteFlowStore,
) -> None:
    execution_id = _first_id(store)
    with pytest.raises(RuntimeError, match="must not write"):
        store.read(lambda tx: _ran(tx, execution_id))
    assert _status(store.path, execution_id) == ("ready", None)
