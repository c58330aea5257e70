"""The ``FlowStore`` contract: Flow runs are inserted, read, listed and updated, times exactly.

Each test runs on both stores (the ``store`` fixture of conftest.py), which must give
the same results.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from dex_agents.ports.flow_rows import FlowStatus
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import add_executions, add_flows, at, execution, flow


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
