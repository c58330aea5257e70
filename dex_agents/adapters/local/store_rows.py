"""Row checks both ``FlowStore`` implementations share: UTC times, copies and limits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TypeVar

from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus, FlowRow, FlowStatus

RowT = TypeVar("RowT", FlowRow, ExecutionRow)

FLOW_TIME_FIELDS = ("created_at", "closed_at")
"""The ``FlowRow`` fields that hold a time."""

EXECUTION_TIME_FIELDS = (
    "created_at",
    "wait_started_at",
    "timer_at",
    "first_attempt_at",
    "not_before",
    "lease_expires_at",
    "heartbeat_at",
    "finished_at",
)
"""The ``ExecutionRow`` fields that hold a time."""


def utc_time(value: datetime, what: str) -> datetime:
    """``value`` in UTC; a naive datetime is refused, because the store could not place it in time."""
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime, not {type(value).__name__}")
    if value.utcoffset() is None:
        raise ValueError(f"{what} must be a timezone-aware datetime, not the naive {value!r}")
    return value.astimezone(UTC)


def row_copy(row: RowT) -> RowT:
    """A field-for-field copy of a row: rows are mutable, and a store's kept ones must not be.

    ``dataclasses.replace`` builds the same through ``__init__`` at five times the cost,
    and a turn copies dozens of rows.
    """
    copy = object.__new__(type(row))
    # A copy of the whole dict given to the new row: filling the row's own dict key by key
    # grew it step by step, twice the cost (9.9 K against 4.1 K instructions an
    # ExecutionRow), and the memory store copies about 50 rows a turn.
    copy.__dict__ = row.__dict__.copy()
    return copy


def _with_utc_times(row: RowT, names: Sequence[str]) -> RowT:
    fields = row.__dict__
    for name in names:
        value = fields[name]
        # A time already in UTC stays as it is (``astimezone`` would return it unchanged).
        if value is not None and not (type(value) is datetime and value.tzinfo is UTC):
            fields[name] = utc_time(value, f"{type(row).__name__}.{name}")
    return row


def normalized_flow(row: FlowRow) -> FlowRow:
    """A copy of a Flow run's row as a store returns it: UTC times, the status as a ``FlowStatus``."""
    copy = row_copy(row)
    if type(row.status) is not FlowStatus:
        copy.status = FlowStatus(row.status)
    return _with_utc_times(copy, FLOW_TIME_FIELDS)


def normalized_execution(row: ExecutionRow) -> ExecutionRow:
    """A copy of a Step execution's row as a store returns it: UTC times, a status, real booleans."""
    copy = row_copy(row)
    if type(row.status) is not ExecutionStatus:
        copy.status = ExecutionStatus(row.status)
    copy.attempt_started = bool(row.attempt_started)
    copy.cancel_requested = bool(row.cancel_requested)
    return _with_utc_times(copy, EXECUTION_TIME_FIELDS)


def moved_execution_message(execution_id: int, stored_flow: str, asked_flow: str) -> str:
    """Why ``update_execution`` refuses a row whose Flow run is not the stored one: a Step
    execution belongs to the run that created it, for good."""
    return (
        f"Step execution {execution_id} belongs to Flow run {stored_flow!r}; "
        f"update_execution cannot move it to {asked_flow!r}"
    )


def check_limit(limit: int) -> None:
    """Refuse a negative row limit, which SQLite would read as "no limit"."""
    if limit < 0:
        raise ValueError(f"limit must be 0 or more, not {limit}")
