"""The change log (``flow_changes``): which Flow runs each commit changed, by number."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from dex_agents.adapters.local.flow_changes import (
    FLOW_CHANGES_SCHEMA,
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
    assert record_changes(execute, {"a", "b"}) == 1
    assert record_changes(execute, {"b", "c"}) == 2
    assert newest_change(execute) == 2
    assert changes_since(execute, 0) == ({"a", "b", "c"}, 2)
    assert changes_since(execute, 1) == ({"b", "c"}, 2)
    assert changes_since(execute, 2) == (set(), 2)
    # A run keeps one row, its newest number.
    assert connection.execute("SELECT count(*) FROM flow_changes").fetchone()[0] == 3


@pytest.mark.parametrize(
    "flow_id",
    ['quote"d', "back\\slash", "new\nline", "tab\t", "ünïcødé ☃", "[1, 2]", "", " "],
)
def test_any_flow_id_is_logged_as_it_is(connection: sqlite3.Connection, flow_id: str) -> None:
    record_changes(connection.execute, {flow_id, "other"})
    assert changes_since(connection.execute, 0) == ({flow_id, "other"}, 1)


def test_a_batch_of_many_runs_is_one_statement(connection: sqlite3.Connection) -> None:
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    flow_ids = {f"session-{n}" for n in range(5000)}  # past SQLite's variable limit
    assert record_changes(connection.execute, flow_ids) == 1
    assert len(statements) == 1
    assert changes_since(connection.execute, 0) == (flow_ids, 1)
