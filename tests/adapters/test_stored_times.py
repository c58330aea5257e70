"""The text the SQLite store writes for a time: UTC to the microsecond, kept once made.

``stored_time`` keeps the text of UTC times it has made, so these check that a
kept text is only ever the text of the same instant, and that bad times are
refused as ``utc_time`` refuses them, by name.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dex_agents.adapters.local import sqlite_rows
from dex_agents.adapters.local.sqlite_rows import (
    STORED_TIMES_KEPT,
    stored_time,
)
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import ExecutionRow
from tests.adapters.flow_store_rows import add_executions, add_flows, execution, flow

NEW_YORK = ZoneInfo("America/New_York")
# 01:30 on 2026-11-01 happens twice in New York: fold 0 is 05:30 UTC, fold 1 is 06:30 UTC.
FIRST_ONE_THIRTY = datetime(2026, 11, 1, 1, 30, tzinfo=NEW_YORK)
SECOND_ONE_THIRTY = FIRST_ONE_THIRTY.replace(fold=1)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=UTC), "2026-03-04T05:06:07.000008+00:00"),
        (datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC), "2026-03-04T05:06:07.000000+00:00"),
        (
            datetime(2026, 3, 4, 7, 6, 7, tzinfo=timezone(timedelta(hours=2))),
            "2026-03-04T05:06:07.000000+00:00",
        ),
        (FIRST_ONE_THIRTY, "2026-11-01T05:30:00.000000+00:00"),
        (SECOND_ONE_THIRTY, "2026-11-01T06:30:00.000000+00:00"),
    ],
)
def test_a_time_is_stored_as_its_utc_text(value: datetime, text: str) -> None:
    assert stored_time(value, "created_at") == text
    assert stored_time(value, "created_at") == text  # and again, from what was kept


def test_the_two_times_of_a_repeated_hour_keep_their_own_texts() -> None:
    # Equal as datetimes of one zone (and hashed alike), an hour apart as instants.
    assert FIRST_ONE_THIRTY == SECOND_ONE_THIRTY
    first = stored_time(FIRST_ONE_THIRTY, "created_at")
    second = stored_time(SECOND_ONE_THIRTY, "created_at")
    assert (first, second) == (
        "2026-11-01T05:30:00.000000+00:00",
        "2026-11-01T06:30:00.000000+00:00",
    )


def test_an_equal_utc_time_gets_the_kept_text() -> None:
    made = stored_time(datetime(2026, 5, 1, 12, tzinfo=UTC), "created_at")
    again = stored_time(datetime(2026, 5, 1, 12, tzinfo=UTC), "created_at")
    assert again is made


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (datetime(2026, 3, 4, 5, 6, 7), ValueError, "created_at must be a timezone-aware"),
        ("2026-03-04T05:06:07+00:00", TypeError, "created_at must be a datetime, not str"),
        ([2026, 3, 4], TypeError, "created_at must be a datetime, not list"),
    ],
)
def test_a_time_that_cannot_be_placed_is_refused_by_name(
    value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        stored_time(value, "created_at")  # type: ignore[arg-type]


def test_the_kept_texts_stay_bounded() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for second in range(STORED_TIMES_KEPT + 10):
        stored_time(start + timedelta(seconds=second), "created_at")
    assert len(sqlite_rows._STORED_TIMES) <= STORED_TIMES_KEPT
    assert stored_time(start, "created_at") == "2026-01-01T00:00:00.000000+00:00"


def test_a_row_with_both_times_of_a_repeated_hour_reads_back_both(tmp_path: Path) -> None:
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")
    try:
        add_flows(store, flow("f1"))
        first, second = add_executions(
            store,
            execution(first_attempt_at=FIRST_ONE_THIRTY),
            execution(first_attempt_at=SECOND_ONE_THIRTY),
        )
        rows: list[ExecutionRow | None] = store.run(
            lambda tx: [tx.get_execution(first), tx.get_execution(second)]
        )
    finally:
        store.close()
    times = [row.first_attempt_at for row in rows if row is not None]
    assert times == [
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
        datetime(2026, 11, 1, 6, 30, tzinfo=UTC),
    ]


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5)), NEW_YORK]),
    )
)
def test_a_time_is_written_as_its_utc_isoformat_to_the_microsecond(value: datetime) -> None:
    # Formatted by hand for speed: the text must stay isoformat's, or stored times would not
    # sort or read back alike (years below 1000 and whole seconds included).
    expected = value.astimezone(UTC).isoformat(timespec="microseconds")
    assert sqlite_rows.encode_time(value) == expected
