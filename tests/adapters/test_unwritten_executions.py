"""A Step execution's INSERT waits for the end of the transaction that creates it.

Most Steps are claimed, put to wait or run in the commit that creates them, so
``SqliteTransaction`` keeps a new execution's values until the commit (or the
first statement that reads ``step_executions``) and writes it once, as it then
is. The ID it hands out before the row is written is one past the last this
connection inserted, which is what ``AUTOINCREMENT`` gives while no other
connection inserts; after another connection commits, or a rollback, the next
insert runs at once and learns it again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_store import ExecutionStatus, StoreTransaction
from tests.adapters.flow_store_rows import add_executions, at, execution
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements


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


def _step_execution_writes(statements: list[str]) -> list[str]:
    return [
        sql.split("(")[0].split(" SET")[0]
        for sql in statements
        if "step_executions" in sql and not sql.startswith("SELECT")
    ]


def test_an_execution_claimed_in_the_commit_that_creates_it_is_written_once(
    store: SqliteFlowStore,
) -> None:
    with traced_statements(store) as statements:
        new_id = store.run(lambda tx: _claimed_in_its_own_commit(tx, "Step-1"))
    assert _step_execution_writes(statements) == ["INSERT INTO step_executions "]
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
