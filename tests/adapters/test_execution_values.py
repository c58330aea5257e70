"""How a Step execution's row is stored: an update encodes only the fields it changed.

``changed_execution_values`` must store exactly what encoding the whole row
(``stored_execution_values``) stores, and name every column whose stored value
moved, whichever fields changed, including a status that makes the row history
(its longest fields are then stored packed).
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.adapters.local.sqlite_row_reads import decode_execution, decode_flow
from dex_agents.adapters.local.sqlite_rows import (
    changed_execution_values,
    execution_fields,
    execution_insert_statement,
    execution_update_statement,
    row_params,
    stored_execution_row,
    stored_execution_values,
)
from dex_agents.adapters.local.sqlite_schema import (
    EXECUTION_COLUMNS,
    EXECUTION_DATA,
    FLOW_COLUMNS,
    SCHEMA,
)
from dex_agents.adapters.local.store_rows import EXECUTION_TIME_FIELDS
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus, FlowRow, FlowStatus
from tests.adapters.flow_store_rows import execution

_TIMES = st.one_of(
    st.none(),
    st.datetimes(
        min_value=datetime(2026, 1, 1),
        max_value=datetime(2026, 12, 31),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=2))]),
    ),
)
_TEXTS = st.one_of(st.none(), st.sampled_from(["{}", '{"durability":"sync"}', "x" * 300]))
_CHANGES: dict[str, st.SearchStrategy[Any]] = {
    "status": st.sampled_from(list(ExecutionStatus)),
    "options": _TEXTS,
    "wait": _TEXTS,
    "wait_result": _TEXTS,
    "attempt": st.integers(1, 5),
    "attempt_started": st.booleans(),
    "cancel_requested": st.booleans(),
    "lease_owner": st.one_of(st.none(), st.sampled_from(["w1", "w2"])),
    "first_attempt_at": _TIMES,
    "lease_expires_at": _TIMES,
    "heartbeat_at": _TIMES,
    "finished_at": _TIMES,
    "final_event": st.one_of(st.none(), st.just("completed")),
}
_ROWS = st.fixed_dictionaries({}, optional=_CHANGES).map(lambda changes: execution(**changes))


@settings(max_examples=300, deadline=None)
@given(before=_ROWS, after=st.fixed_dictionaries({}, optional=_CHANGES))
def test_an_update_stores_what_the_whole_row_would(
    before: ExecutionRow, after: dict[str, Any]
) -> None:
    fields_before = execution_fields(before)
    stored_before = stored_execution_values(fields_before)
    fields_now = execution_fields(replace(before, **after))
    stored, changed = changed_execution_values(fields_now, fields_before, stored_before)
    assert stored == stored_execution_values(fields_now)
    assert changed == [
        position
        for position, (new, old) in enumerate(zip(stored, stored_before, strict=True))
        if new != old
    ]


def test_a_finished_status_packs_the_unchanged_wait_fields() -> None:
    before = execution(options="x" * 300, wait_result="y" * 300, status=ExecutionStatus.RUNNING)
    fields_before = execution_fields(before)
    finished = replace(before, status=ExecutionStatus.COMPLETED)
    stored, changed = changed_execution_values(
        execution_fields(finished), fields_before, stored_execution_values(fields_before)
    )
    options, wait_result = EXECUTION_DATA.index("options"), EXECUTION_DATA.index("wait_result")
    assert isinstance(stored[options], bytes)
    assert isinstance(stored[wait_result], bytes)
    # The options were packed when the row was written: finishing does not write them again.
    assert changed == sorted([EXECUTION_DATA.index("status"), wait_result])


@pytest.mark.parametrize("status", [ExecutionStatus.READY, ExecutionStatus.RUNNING])
def test_options_are_stored_packed_from_the_first_write(status: ExecutionStatus) -> None:
    # A row that shrank when it finished left its page part empty: options are written
    # packed at once, so a row is about its final size from the first write.
    row = execution(options="x" * 300, wait="w" * 300, wait_result="y" * 300, status=status)
    stored = stored_execution_values(execution_fields(row))
    assert isinstance(stored[EXECUTION_DATA.index("options")], bytes)
    assert stored[EXECUTION_DATA.index("wait")] == "w" * 300
    assert stored[EXECUTION_DATA.index("wait_result")] == "y" * 300
    assert decode_execution(stored_execution_row(7, stored)) == replace(row, id=7)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("heartbeat_at", datetime(2026, 1, 1), "timezone-aware"),
        ("status", "resting", "resting"),
    ],
)
def test_a_changed_field_is_checked_as_a_whole_row_is(field: str, value: Any, error: str) -> None:
    before = execution()
    fields_before = execution_fields(before)
    with pytest.raises(ValueError, match=error):
        changed_execution_values(
            execution_fields(replace(before, **{field: value})),
            fields_before,
            stored_execution_values(fields_before),
        )


@pytest.mark.parametrize(
    ("status", "stored"),
    [(status, status.value) for status in ExecutionStatus]
    + [(status.value, status.value) for status in ExecutionStatus],
)
def test_a_status_or_its_text_is_stored_as_plain_text_and_read_back_as_the_member(
    status: Any, stored: str
) -> None:
    values = stored_execution_values(execution_fields(execution(status=status)))
    text = values[EXECUTION_DATA.index("status")]
    assert text == stored
    assert type(text) is str  # bound to SQLite as text, compared with what SQLite returns
    read = decode_execution(stored_execution_row(1, values))
    assert read.status is ExecutionStatus(stored)


@pytest.mark.parametrize("status", ["resting", "RUNNING", "", 1, None, ("running",)])
def test_a_status_that_is_no_member_is_refused_on_write_and_on_read(status: Any) -> None:
    with pytest.raises(ValueError, match="is not a valid ExecutionStatus"):
        stored_execution_values(execution_fields(execution(status=status)))
    values = stored_execution_values(execution_fields(execution()))
    values[EXECUTION_DATA.index("status")] = status
    with pytest.raises(ValueError, match="is not a valid ExecutionStatus"):
        decode_execution(stored_execution_row(1, values))


@settings(max_examples=200, deadline=None)
@given(before=_ROWS, after=st.fixed_dictionaries({}, optional=_CHANGES))
def test_an_insert_and_an_update_store_their_nulls_and_values_in_place(
    before: ExecutionRow, after: dict[str, Any]
) -> None:
    # Their NULLs are written in the statements' text and only the other values bound:
    # every column must still get its own value.
    connection = sqlite3.connect(":memory:", isolation_level=None)
    for statement in SCHEMA:
        connection.execute(statement)
    select = f"SELECT {', '.join(EXECUTION_COLUMNS)} FROM step_executions WHERE id = ?"
    fields_before = execution_fields(before)
    stored_before = stored_execution_values(fields_before)
    connection.execute(*execution_insert_statement(7, stored_before))
    assert connection.execute(select, (7,)).fetchone() == stored_execution_row(7, stored_before)
    fields_now = execution_fields(replace(before, **after))
    stored, changed = changed_execution_values(fields_now, fields_before, stored_before)
    if changed:  # the store updates no row whose stored values stayed
        connection.execute(*execution_update_statement(7, stored, changed))
    assert connection.execute(select, (7,)).fetchone() == stored_execution_row(7, stored)
    connection.close()


def test_every_column_of_a_stored_row_is_read_back_into_its_own_field() -> None:
    # The decoders name each column in place (sqlite_rows): every field here differs from
    # every other, so two columns read into each other's fields, or a time, a flag or a
    # packed text left as stored, fails.
    times: dict[str, Any] = {
        name: datetime(2026, 3, 1, tzinfo=UTC) + timedelta(hours=i)
        for i, name in enumerate(EXECUTION_TIME_FIELDS)
    }
    texts: dict[str, Any] = {
        name: f"{name}-{'x' * 300 if name in {'options', 'wait', 'wait_result'} else 'v'}"
        for name in EXECUTION_COLUMNS
        if name not in {*times, "status", "id", "attempt", "attempt_started", "cancel_requested"}
    }
    row = ExecutionRow(
        **times,
        **texts,
        status=ExecutionStatus.COMPLETED,
        id=41,
        attempt=3,
        attempt_started=True,
        cancel_requested=False,
    )
    stored = stored_execution_values(execution_fields(row))
    assert isinstance(stored[EXECUTION_DATA.index("wait")], bytes)  # finished: packed
    assert decode_execution(stored_execution_row(41, stored)) == row
    flipped = replace(row, attempt_started=False, cancel_requested=True)
    stored = stored_execution_values(execution_fields(flipped))
    read = decode_execution(stored_execution_row(41, stored))
    assert read == flipped
    assert type(read.attempt_started) is bool
    assert type(read.cancel_requested) is bool  # SQLite's 1 equals True: the type tells
    flow = FlowRow(
        "f-id",
        "f-type",
        "f-run",
        FlowStatus.FAILED,
        "f-input",
        datetime(2026, 3, 1, tzinfo=UTC),
        datetime(2026, 3, 2, tzinfo=UTC),
        "f-output",
        "f-reason",
    )
    assert decode_flow(tuple(row_params(flow, FLOW_COLUMNS).values())) == flow
