"""The row checks both stores share: a copy in UTC, with a status and real booleans."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from dex_agents.adapters.local.store_rows import normalized_execution, normalized_flow
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus, FlowRow, FlowStatus

INDIA = timezone(timedelta(hours=5, minutes=30))
AT_UTC = datetime(2031, 7, 8, 3, 40, 11, 123456, tzinfo=UTC)


def execution(**fields: Any) -> ExecutionRow:
    return ExecutionRow("f1", "Step", "Step-1", "{}", ExecutionStatus.READY, AT_UTC, **fields)


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(AT_UTC, id="UTC"),
        pytest.param(AT_UTC.astimezone(INDIA), id="another offset"),
        pytest.param(AT_UTC.astimezone(ZoneInfo("UTC")), id="zoneinfo's UTC"),
        pytest.param(AT_UTC.astimezone(ZoneInfo("America/New_York")), id="a named zone"),
    ],
)
def test_every_time_of_an_execution_comes_back_as_the_same_instant_in_utc(given: datetime) -> None:
    # The fields are found from the row's annotations, not the module's list, so a time field
    # added to ExecutionRow and left out of the conversion fails here.
    times = [field.name for field in fields(ExecutionRow) if "datetime" in str(field.type)]
    assert len(times) == 8
    row = execution()
    for name in times:
        setattr(row, name, given)
    stored = normalized_execution(row)
    for name in times:
        value = getattr(stored, name)
        assert value == AT_UTC, name
        assert value.tzinfo is UTC, name
        assert getattr(row, name) is given, f"{name} of the given row changed"


def test_an_execution_copy_has_its_status_and_booleans_and_leaves_the_given_row_alone() -> None:
    row = execution(attempt_started=1, cancel_requested=0)
    row.status = "running"  # type: ignore[assignment]
    stored = normalized_execution(row)
    assert stored is not row
    assert stored.status is ExecutionStatus.RUNNING
    assert stored.attempt_started is True
    assert stored.cancel_requested is False
    assert row.status == "running"
    assert row.attempt_started == 1
    stored.lease_owner = "w1"
    assert row.lease_owner is None


def test_a_flow_copy_has_its_status_and_utc_times() -> None:
    row = FlowRow("f1", "Agent", "run-1", "running", "{}", AT_UTC.astimezone(INDIA))  # type: ignore[arg-type]
    stored = normalized_flow(row)
    assert stored is not row
    assert stored.status is FlowStatus.RUNNING
    assert stored.created_at == AT_UTC
    assert stored.created_at.tzinfo is UTC
    assert stored.closed_at is None
    assert row.status == "running"
    assert row.created_at.tzinfo is INDIA


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        (
            {"timer_at": datetime(2030, 1, 1)},
            ValueError,
            r"ExecutionRow\.timer_at must be a timezone-aware",
        ),
        (
            {"heartbeat_at": "2030-01-01"},
            TypeError,
            r"ExecutionRow\.heartbeat_at must be a datetime, not str",
        ),
    ],
)
def test_a_time_that_is_naive_or_not_a_time_is_refused_with_its_field_named(
    fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        normalized_execution(execution(**fields))


def test_an_unknown_status_is_refused() -> None:
    row = execution()
    row.status = "sleeping"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="sleeping"):
        normalized_execution(row)
