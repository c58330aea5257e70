"""The ``FlowStore`` contract: claimable executions, due timers, leases, the next timer.

Each test runs on both stores (the ``store`` fixture of conftest.py), which must give
the same results.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus, FlowStatus
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import add_executions, add_flows, at, execution, flow


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
        execution(status=running, lease_owner="w1", cancel_requested=True),  # 8
        execution(status=running, lease_owner="w2", cancel_requested=True),  # 9
        execution(status=ExecutionStatus.READY, lease_owner="w1", cancel_requested=True),
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
    assert leased("w1") == [ids[4], ids[7], ids[8]]
    assert leased("w3") == []
    # The owners of running executions' leases; a finished or ready row's owner is none.
    assert store.read(lambda tx: tx.lease_owners()) == {"w1", "w2"}
    # What leased_executions tells of cancellations, as IDs alone.
    assert store.run(lambda tx: tx.cancel_requested_executions("w1")) == [ids[8]]
    assert store.run(lambda tx: tx.cancel_requested_executions("w2")) == [ids[9]]
    assert store.run(lambda tx: tx.cancel_requested_executions("w3")) == []

    def w2_finished(tx: StoreTransaction) -> set[str]:
        for row in tx.leased_executions("w2"):
            row.status = ExecutionStatus.COMPLETED
            tx.update_execution(row)
        return tx.lease_owners()

    assert store.run(w2_finished) == {"w1"}


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
