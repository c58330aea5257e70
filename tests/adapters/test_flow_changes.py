"""The change log (``flow_changes``): which Flow runs each commit changed, by number."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

import pytest

from dex_agents.adapters.local.flow_changes import (
    FLOW_CHANGES_SCHEMA,
    LoggedChanges,
    changes_since,
    newest_change,
    record_changes,
)


@pytest.fixture
def connection() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    for statement in FLOW_CHANGES_SCHEMA:
        connection.execute(statement)
    try:
        yield connection
    finally:
        connection.close()


def test_each_commit_logs_its_runs_under_one_new_number(connection: sqlite3.Connection) -> None:
    execute = connection.execute
    assert newest_change(execute) == 0
    assert record_changes(execute, {"a", "b"}, {"a"}, {"b"}) == 1
    assert record_changes(execute, {"b", "c"}, set(), set()) == 2
    assert record_changes(execute, {"c"}, {"c"}, {"c"}) == 3
    assert newest_change(execute) == 3
    assert changes_since(execute, 0) == LoggedChanges(
        {"a": False, "b": True, "c": True}, {"a": 1, "c": 3}, 3
    )
    # b changed after 1, without events, and its state at 1, not after; c's state at 3.
    assert changes_since(execute, 1) == LoggedChanges({"b": False, "c": True}, {"c": 3}, 3)
    assert changes_since(execute, 3) == LoggedChanges({}, {}, 3)
    # A run keeps one row: its newest change, its newest with events, its newest with state.
    rows = connection.execute("SELECT * FROM flow_changes ORDER BY flow_id").fetchall()
    assert rows == [("a", 1, 1, 0), ("b", 2, 0, 1), ("c", 3, 3, 3)]


def test_a_later_change_without_events_keeps_the_run_s_newest_events(
    connection: sqlite3.Connection,
) -> None:
    execute = connection.execute
    record_changes(execute, {"a"}, {"a"}, {"a"})
    record_changes(execute, {"a"}, set(), set())
    assert changes_since(execute, 0) == LoggedChanges({"a": True}, {"a": 1}, 2)
    assert changes_since(execute, 1) == LoggedChanges({"a": False}, {}, 2)


@pytest.mark.parametrize(
    "flow_id",
    ['quote"d', "back\\slash", "new\nline", "tab\t", "ünïcødé ☃", "[1, 2]", "", " ", "$[0]"],
)
def test_any_flow_id_is_logged_as_it_is(connection: sqlite3.Connection, flow_id: str) -> None:
    record_changes(connection.execute, {flow_id, "other"}, {flow_id}, {"other"})
    assert changes_since(connection.execute, 0) == LoggedChanges(
        {flow_id: False, "other": True}, {flow_id: 1}, 1
    )
    # Alone, as most commits log it (a statement of its own, without JSON).
    record_changes(connection.execute, {flow_id}, {flow_id}, {flow_id})
    assert changes_since(connection.execute, 1) == LoggedChanges({flow_id: True}, {flow_id: 2}, 2)
    record_changes(connection.execute, {flow_id}, set(), set())
    assert changes_since(connection.execute, 2) == LoggedChanges({flow_id: False}, {}, 3)


def test_a_batch_of_many_runs_is_one_write(connection: sqlite3.Connection) -> None:
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    flow_ids = {f"session-{n}" for n in range(5000)}  # past SQLite's variable limit
    with_events = {f"session-{n}" for n in range(0, 5000, 2)}
    with_state = {f"session-{n}" for n in range(0, 5000, 3)}
    assert record_changes(connection.execute, flow_ids, with_events, with_state) == 1
    assert len(statements) == 2  # the newest number read, then one INSERT
    assert changes_since(connection.execute, 0) == LoggedChanges(
        {flow_id: flow_id in with_state for flow_id in flow_ids},
        dict.fromkeys(with_events, 1),
        1,
    )


def test_a_lone_run_s_flags_are_bound_as_exact_ints(connection: sqlite3.Connection) -> None:
    # Python's sqlite3 binds an exact int as it is, but looks up an adapter for a bool
    # first: each commit logs one run, so its two flags are bound as ints.
    bound: list[tuple[object, ...]] = []

    def execute(sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        bound.append(tuple(params))
        return connection.execute(sql, params)

    record_changes(execute, {"a"}, {"a"}, set())
    record_changes(execute, {"a"}, set(), {"a"})
    written = [params[1:] for params in bound if params]  # the INSERTs, not the number's read
    assert [[type(value) for value in params] for params in written] == [[int, int, int]] * 2
    assert changes_since(connection.execute, 0) == LoggedChanges({"a": True}, {"a": 1}, 2)


@pytest.mark.parametrize("flow_ids", [{"a"}, {"a", "b"}])
def test_a_record_reads_its_number_rather_than_returning_it(
    connection: sqlite3.Connection, flow_ids: set[str]
) -> None:
    # A RETURNING clause makes SQLite gather the rows in an ephemeral table, a B-tree
    # opened and closed per statement: several times the cost of reading the number first.
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    assert record_changes(connection.execute, flow_ids, flow_ids, set()) == 1
    assert record_changes(connection.execute, flow_ids, set(), flow_ids) == 2
    assert statements
    assert not [sql for sql in statements if "RETURNING" in sql.upper()]
    assert changes_since(connection.execute, 0) == LoggedChanges(
        dict.fromkeys(flow_ids, True), dict.fromkeys(flow_ids, 1), 2
    )
