"""The SQLite store's tables and indexes: the upgrade of older files, and what each lookup reads."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_schema import (
    ATTRIBUTE_KEYS_SELECT,
    CLAIMABLE_WHERE,
    DUE_TIMERS_WHERE,
    EXECUTION_SELECT,
    EXPIRED_LEASES_WHERE,
    LEASED_WHERE,
    NEXT_TIMER_SELECT,
    RETIRED_INDEXES,
)
from dex_agents.adapters.local.sqlite_store import (
    SCHEMA_VERSION,
    UPGRADED_VERSIONS,
    SqliteFlowStore,
)
from dex_agents.adapters.local.sqlite_versions import NEW_FILE_PAGE_SIZE
from dex_agents.adapters.local.stored_text import pack_value
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import add_flows, flow

LONG = json.dumps({"messages": [{"text": f"message {n}", "role": "user"} for n in range(200)]})

# What versions 1 and 2 created: Attribute values in a WITHOUT ROWID table, and an index
# of its keys beside the primary key; no table of Stream blocks.
VERSION_2_ATTRIBUTES = (
    """CREATE TABLE attribute_values (
        flow_id TEXT NOT NULL, name TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
        PRIMARY KEY (flow_id, name, key)) WITHOUT ROWID""",
    "CREATE INDEX attribute_keys ON attribute_values (flow_id, name, key)",
)


def _raw(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def _older_file(path: Path, version: int, values: dict[str, str | bytes]) -> None:
    SqliteFlowStore(path).close()
    connection = sqlite3.connect(path)
    with connection:
        if version < 4:
            connection.execute("DROP TABLE flow_changes")
        else:  # versions 4 and 5 logged no run's newest state change
            connection.execute("ALTER TABLE flow_changes DROP COLUMN state")
        if version < 3:
            connection.execute("DROP TABLE attribute_values")
            connection.execute("DROP TABLE event_blocks")
            for statement in VERSION_2_ATTRIBUTES:
                connection.execute(statement)
        for name, stored in values.items():
            connection.execute(
                "INSERT INTO attribute_values VALUES ('f1', ?, '', ?)", (name, stored)
            )
    connection.execute(f"PRAGMA user_version = {version}")
    connection.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_a_file_of_an_older_version_opens_upgraded_with_every_value(
    tmp_path: Path, version: int
) -> None:
    assert UPGRADED_VERSIONS == (1, 2, 3, 4, 5)
    path = tmp_path / "flows.sqlite3"
    # Version 1 wrote every value as text; versions 2 and 3 compressed the long ones.
    values: dict[str, str | bytes] = {"short": '"short"', "long": LONG}
    if version >= 2:
        values["packed"] = pack_value(LONG)
    _older_file(path, version, values)

    store = SqliteFlowStore(path)
    try:
        read = store.read(lambda tx: tx.get_singletons("f1", sorted(values)))
        assert read == {name: '"short"' if name == "short" else LONG for name in values}
        store.run(lambda tx: tx.put_value("f1", "short", "", '"again"'))
        assert store.read(lambda tx: tx.get_value("f1", "short", "")) == '"again"'
    finally:
        store.close()
    assert _raw(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    [(table_sql,)] = _raw(path, "SELECT sql FROM sqlite_master WHERE name = 'attribute_values'")
    assert "WITHOUT ROWID" not in str(table_sql)
    names = {row[0] for row in _raw(path, "SELECT name FROM sqlite_master")}
    assert "attribute_keys" not in names
    assert "attribute_values_2" not in names
    # The write above was logged in the change log the upgrade made, as a write of state.
    assert _raw(path, "SELECT flow_id, change, state FROM flow_changes") == [("f1", 1, 1)]


def test_a_change_log_of_version_5_counts_every_logged_change_as_one_of_state(
    tmp_path: Path,
) -> None:
    # Version 5 logged no part: a connection that kept a run's values must forget them.
    path = tmp_path / "flows.sqlite3"
    _older_file(path, 5, {})
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("INSERT INTO flow_changes VALUES ('f1', 7, 0), ('f2', 8, 8)")
    connection.close()
    SqliteFlowStore(path).close()
    assert _raw(path, "SELECT flow_id, change, events, state FROM flow_changes") == [
        ("f1", 7, 0, 7),
        ("f2", 8, 8, 8),
    ]


def test_a_value_written_again_keeps_its_row(tmp_path: Path) -> None:
    # An upsert rewrites the row where it is; INSERT OR REPLACE would move it to the end of
    # the table on every write, leaving the pages it left behind part empty.
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    add_flows(store, flow("f1"))
    try:
        store.run(lambda tx: tx.put_value("f1", "state", "", '"one"'))
        store.run(lambda tx: tx.put_value("f1", "other", "", '"x"'))
        [(before,)] = _raw(path, "SELECT rowid FROM attribute_values WHERE name = 'state'")
        store.run(lambda tx: tx.put_value("f1", "state", "", '"two, and longer"'))
        [(after,)] = _raw(path, "SELECT rowid FROM attribute_values WHERE name = 'state'")
    finally:
        store.close()
    assert after == before


def test_a_new_file_has_pages_of_the_new_file_size(tmp_path: Path) -> None:
    assert NEW_FILE_PAGE_SIZE == 1024
    path = tmp_path / "flows.sqlite3"
    SqliteFlowStore(path).close()
    assert _raw(path, "PRAGMA page_size") == [(NEW_FILE_PAGE_SIZE,)]


@pytest.mark.parametrize("page_size", [512, 4096, 8192])
def test_a_file_made_with_other_pages_keeps_them_and_every_value(
    tmp_path: Path, page_size: int
) -> None:
    path = tmp_path / "flows.sqlite3"
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA page_size = {page_size}")
    connection.execute("PRAGMA journal_mode=WAL")  # writes the header: the size is the file's
    connection.close()
    # Longer than any of the pages once compressed: it spills to overflow pages.
    spilling = json.dumps([f"{n:08x}{n * 7919 % 65521:08x}" for n in range(1500)])
    assert len(pack_value(spilling)) > 8192
    values = {"short": '"short"', "long": LONG, "spilling": spilling}
    store = SqliteFlowStore(path)
    try:
        add_flows(store, flow("f1"))

        def put_all(tx: StoreTransaction) -> None:
            for name, text in values.items():
                tx.put_value("f1", name, "", text)

        store.run(put_all)
    finally:
        store.close()
    store = SqliteFlowStore(path)
    try:
        read = store.read(lambda tx: tx.get_singletons("f1", sorted(values)))
    finally:
        store.close()
    assert read == values
    assert _raw(path, "PRAGMA page_size") == [(page_size,)]


@pytest.mark.parametrize(
    ("sql", "reads"),
    [
        (
            f"SELECT {EXECUTION_SELECT} FROM step_executions e {CLAIMABLE_WHERE}",
            "claimable_executions",
        ),
        (f"SELECT {EXECUTION_SELECT} FROM step_executions e {DUE_TIMERS_WHERE}", "timed_waits"),
        (
            f"SELECT {EXECUTION_SELECT} FROM step_executions e {EXPIRED_LEASES_WHERE}",
            "running_executions",
        ),
        (
            f"SELECT {EXECUTION_SELECT} FROM step_executions e {LEASED_WHERE}",
            "running_executions",
        ),
        (NEXT_TIMER_SELECT, "claimable_executions"),
        (NEXT_TIMER_SELECT, "timed_waits"),
        (ATTRIBUTE_KEYS_SELECT, "COVERING INDEX sqlite_autoindex_attribute_values_1"),
    ],
    ids=[
        "claimable",
        "due-timers",
        "expired-leases",
        "leased",
        "next-timer-claimable",
        "next-timer-waiting",
        "map-keys",
    ],
)
def test_each_worker_lookup_reads_its_index(tmp_path: Path, sql: str, reads: str) -> None:
    # The partial indexes hold only the executions in the status they serve, so the
    # Step history's finished executions cost them nothing; a lookup that fell back to
    # scanning the table would read every one of those.
    path = tmp_path / "flows.sqlite3"
    SqliteFlowStore(path).close()
    plan = _raw(path, f"EXPLAIN QUERY PLAN {sql}", tuple(1 for _ in range(sql.count("?"))))
    details = " ".join(str(row[-1]) for row in plan)
    assert reads in details
    assert "SCAN e " not in details + " "


def test_a_file_with_the_retired_indexes_gets_the_new_ones_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    SqliteFlowStore(path).close()
    connection = sqlite3.connect(path)
    with connection:
        for name in ("claimable_executions", "timed_waits", "running_executions"):
            connection.execute(f"DROP INDEX {name}")
        connection.execute(
            "CREATE INDEX executions_claimable ON step_executions (status, not_before)"
        )
        # As files made before 2026-12-03 hold them.
        connection.execute(
            "CREATE INDEX waiting_timers ON step_executions (status, timer_at)"
            " WHERE status = 'waiting'"
        )
        connection.execute(
            "CREATE INDEX running_leases ON step_executions (status, lease_expires_at)"
            " WHERE status = 'running'"
        )
        connection.execute(
            "CREATE INDEX running_by_owner ON step_executions (lease_owner)"
            " WHERE status = 'running'"
        )
    connection.close()
    SqliteFlowStore(path).close()
    names = {row[0] for row in _raw(path, "SELECT name FROM sqlite_master")}
    assert {"claimable_executions", "timed_waits", "running_executions"} <= names
    assert not names & set(RETIRED_INDEXES)
