"""The SQLite ``FlowStore`` only: durability settings, sharing between connections, errors."""

from __future__ import annotations

import gc
import json
import re
import sqlite3
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.decoded_values import DEFAULT_CACHE_BYTES
from dex_agents.adapters.local.sqlite_store import (
    SCHEMA_VERSION,
    SqliteFlowStore,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreVersionError,
)
from dex_agents.ports.errors import EngineError
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import (
    add_executions,
    add_flows,
    at,
    execution,
    flow,
    write_held_open,
)
from tests.adapters.traced_sql import traced_statements


def test_sqlite_data_survives_a_fresh_store_on_the_same_path(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    first = SqliteFlowStore(path)
    add_flows(first, flow("f1"))
    event = first.run(lambda tx: tx.append_event("Agent", "f1", "1", "s", at(1)))
    first.close()
    second = SqliteFlowStore(str(path))
    assert second.run(lambda tx: tx.get_flow("f1")) == flow("f1")
    assert second.run(lambda tx: tx.append_event("Agent", "f1", "2", "s", at(2))) == event + 1
    second.close()


def test_a_store_opened_through_a_link_syncs_and_shares_the_real_file(tmp_path: Path) -> None:
    # SQLite keeps the -wal file beside the link's target: the store must sync that one, and
    # a process that names the file by its link works with one that names it directly.
    real = tmp_path / "real.sqlite3"
    link = tmp_path / "link.sqlite3"
    direct = SqliteFlowStore(real)
    link.symlink_to(real)
    linked = SqliteFlowStore(link)
    try:
        add_flows(linked, flow("f1"))
        add_flows(linked, flow("f2"))  # the first durable commit did not break the store
        assert [row.flow_id for row in direct.read(lambda tx: tx.list_flows())] == ["f1", "f2"]
        watch = linked.watch_writes()
        assert watch is not None
        try:
            add_flows(direct, flow("f3"))
            assert watch.drain()  # the link's store hears the real file's commits
        finally:
            watch.close()
        assert linked.path == real
    finally:
        linked.close()
        direct.close()


def test_a_store_named_by_a_relative_path_keeps_its_file_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SqliteFlowStore("sessions.sqlite3")
    try:
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.chdir(tmp_path / "elsewhere")  # a tool of the process may change it
        add_flows(store, flow("f1"))
        assert [row.flow_id for row in store.read(lambda tx: tx.list_flows())] == ["f1"]
        assert store.path == tmp_path / "sessions.sqlite3"
    finally:
        store.close()


def test_sqlite_sees_commits_of_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    one, two = SqliteFlowStore(path), SqliteFlowStore(path)
    try:
        before = one.change_counter()
        add_flows(two, flow("f1"))
        assert one.change_counter() != before
        assert one.run(lambda tx: tx.get_flow("f1")) == flow("f1")
    finally:
        one.close()
        two.close()


WRITER = """
import sys
from datetime import UTC, datetime
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore

store = SqliteFlowStore(sys.argv[1])
n = 0
while True:
    n += 1
    def work(tx, n=n):
        tx.put_value("f1", "count", "", str(n))
        tx.append_event("Agent", "f1", str(n), "writer", datetime.now(UTC))
    store.run(work)
"""


def test_sqlite_a_killed_writer_leaves_whole_transactions(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    reader = SqliteFlowStore(path)
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    try:
        for _ in range(1000):
            if int(reader.read(lambda tx: tx.get_value("f1", "count", "")) or "0") >= 20:
                break
            child_exit = child.poll()
            assert child_exit is None, f"the writer exited with {child_exit}"
            threading.Event().wait(0.01)
    finally:
        child.kill()
        child.wait()
    reader.close()
    fresh = SqliteFlowStore(path)
    count = int(fresh.run(lambda tx: tx.get_value("f1", "count", "")) or "0")
    events = fresh.run(lambda tx: tx.events_after("f1", 0, 1_000_000))
    fresh.close()
    assert count >= 20
    assert [event.value for event in events] == [str(n) for n in range(1, count + 1)]
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    connection.close()


def test_sqlite_runs_in_wal_mode_with_normal_sync_and_savepoint_journals_in_memory(
    tmp_path: Path,
) -> None:
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")
    connection = store._connection  # the store's own connection: these pragmas are per connection
    assert connection is not None
    pragmas = [
        connection.execute(f"PRAGMA {name}").fetchone()[0]
        for name in ("journal_mode", "synchronous", "temp_store", "user_version")
    ]
    store.close()
    # synchronous 1 is NORMAL: SQLite syncs nothing inside COMMIT, the store syncs a durable
    # commit after it (test_wal_sync.py). temp_store 2 is MEMORY: a savepoint's journal is no
    # file made and deleted per transaction.
    assert pragmas == ["wal", 1, 2, SCHEMA_VERSION]


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are not the pages you are looking for" * 100)
    with pytest.raises(
        StoreCorruptError, match=re.escape(f"{path} is not a usable dex-agents flow store")
    ):
        SqliteFlowStore(path)


def test_sqlite_refuses_a_foreign_database(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE mine (x)")
    connection.close()
    with pytest.raises(
        StoreCorruptError, match="is an SQLite database but not a dex-agents flow store"
    ):
        SqliteFlowStore(path)


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    SqliteFlowStore(path).close()
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    connection.close()
    with pytest.raises(StoreVersionError) as raised:
        SqliteFlowStore(path)
    assert str(raised.value) == (
        f"the flow store {path} has schema version {SCHEMA_VERSION + 1}, newer than "
        f"{SCHEMA_VERSION}, the newest this dex-agents reads; upgrade dex-agents"
    )


def test_sqlite_reports_a_lock_held_past_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    holder, waiter = SqliteFlowStore(path), SqliteFlowStore(path, busy_timeout=timedelta(0))
    with write_held_open(holder), pytest.raises(StoreBusyError) as raised:
        waiter.run(lambda tx: tx.get_flow("f1"))
    assert isinstance(raised.value, EngineError)
    assert raised.value.retryable is True
    assert str(raised.value) == (
        f"the flow store {path} stayed locked by another connection for longer than "
        "the busy timeout (0 s); retry later"
    )
    assert waiter.run(lambda tx: tx.get_flow("f1")) is None
    holder.close()
    waiter.close()


def _switching(path: Path) -> sqlite3.Connection:
    """A connection holding the write lock of a file still in rollback mode, as another
    process's store does while it switches a new file to WAL."""
    holder = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_a_first_open_waits_while_another_process_switches_the_new_file(tmp_path: Path) -> None:
    # SQLite refuses the switch at once, without its busy handler, when another connection
    # writes the file: two processes opening a new file together failed one of them.
    path = tmp_path / "flows.sqlite3"
    holder = _switching(path)
    releaser = threading.Timer(0.2, lambda: holder.execute("ROLLBACK"))
    releaser.start()
    try:
        store = SqliteFlowStore(path, busy_timeout=timedelta(seconds=30))
    finally:
        releaser.join()
        holder.close()
    add_flows(store, flow("f1"))
    assert store.run(lambda tx: tx.get_flow("f1")) == flow("f1")
    store.close()
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()


def test_a_first_open_reports_a_switch_held_past_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    holder = _switching(path)
    with pytest.raises(StoreBusyError) as raised:
        SqliteFlowStore(path, busy_timeout=timedelta(milliseconds=50))
    assert str(raised.value) == (
        f"the flow store {path} stayed locked by another connection for longer than "
        "the busy timeout (0.05 s); retry later"
    )
    holder.execute("ROLLBACK")
    holder.close()
    store = SqliteFlowStore(path)
    add_flows(store, flow("f1"))
    assert store.run(lambda tx: tx.get_flow("f1")) == flow("f1")
    store.close()


@pytest.mark.parametrize("path", ["", ":memory:", "file:flows?mode=memory"])
def test_sqlite_needs_a_file_path(path: str) -> None:
    with pytest.raises(ValueError, match="SqliteFlowStore needs a file path"):
        SqliteFlowStore(path)


def test_sqlite_names_a_path_it_cannot_open(tmp_path: Path) -> None:
    path = tmp_path / "no-such-directory" / "flows.sqlite3"
    with pytest.raises(StoreError) as raised:
        SqliteFlowStore(path)
    assert str(raised.value) == f"cannot open the flow store {path}: unable to open database file"


def test_sqlite_a_read_does_not_wait_for_another_connections_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    writer = SqliteFlowStore(path)
    reader = SqliteFlowStore(path, busy_timeout=timedelta(milliseconds=100))
    writer.run(lambda tx: tx.put_value("f1", "a", "", "1"))
    with write_held_open(writer, lambda tx: tx.put_value("f1", "a", "", "2")):
        # The writer holds the write lock with an uncommitted change: the reader sees the
        # last committed snapshot at once instead of timing out.
        assert reader.read(lambda tx: tx.get_value("f1", "a", "")) == "1"
    assert reader.read(lambda tx: tx.get_value("f1", "a", "")) == "2"
    reader.close()
    writer.close()


def test_a_file_made_before_the_status_index_gets_it_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    SqliteFlowStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute("DROP INDEX executions_by_flow_status")
        connection.execute("CREATE INDEX executions_by_flow ON step_executions (flow_id)")
    connection.close()
    SqliteFlowStore(path).close()
    with sqlite3.connect(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    connection.close()
    assert "executions_by_flow_status" in names
    assert "executions_by_flow" not in names


def test_sqlite_keeps_write_once_values_it_has_read(tmp_path: Path) -> None:
    # Another connection rewrites a value behind the store's back (what the
    # write-once contract forbids): the store that read it keeps serving the
    # text it read, so its later loads did not read the value again.
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    keys = [f"{n:05d}" for n in range(1, 601)]

    def write(tx: StoreTransaction) -> None:
        for key in keys:
            tx.put_value("f1", "chunks", key, f'"chunk {key}"')

    store.run(write)
    first = store.read(lambda tx: tx.get_write_once_values("f1", "chunks"))
    assert list(first) == keys
    with sqlite3.connect(path) as other:
        other.execute("UPDATE attribute_values SET value = '\"changed\"' WHERE name = 'chunks'")
    assert store.read(lambda tx: tx.get_write_once_values("f1", "chunks")) == first
    by_key = store.read(lambda tx: tx.get_write_once_values("f1", "chunks", keys[:2]))
    assert by_key == {key: first[key] for key in keys[:2]}
    # One kept instance read by key is served from what was kept too.
    assert store.read(lambda tx: tx.get_value("f1", "chunks", keys[0])) == first[keys[0]]
    assert set(store.read(lambda tx: tx.get_values("f1", "chunks")).values()) == {'"changed"'}
    fresh = SqliteFlowStore(path)
    assert set(fresh.read(lambda tx: tx.get_write_once_values("f1", "chunks")).values()) == {
        '"changed"'
    }
    fresh.close()
    store.close()


def test_sqlite_keeps_as_much_write_once_text_as_the_decoded_values_it_reads_into(
    tmp_path: Path,
) -> None:
    # Many sessions' chunks, three quarters of what DecodedValues keeps decoded: a
    # second load of each reads only their keys, none of their values, again.
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")
    chunk_chars, per_flow = 64 * 1024, 8
    flows = [f"f{n}" for n in range(DEFAULT_CACHE_BYTES * 3 // 4 // (chunk_chars * per_flow))]
    assert len(flows) == 48

    def write(tx: StoreTransaction) -> None:
        for flow_id in flows:
            for n in range(per_flow):
                tx.put_value(flow_id, "chunks", f"{n:05d}", f'"{flow_id}-{n}"'.ljust(chunk_chars))

    store.run(write)

    def load(flow_id: str) -> dict[str, str]:
        return store.read(lambda tx: tx.get_write_once_values(flow_id, "chunks"))

    for flow_id in flows:
        load(flow_id)
    with traced_statements(store) as statements:
        for flow_id in flows:
            assert len(load(flow_id)) == per_flow
    assert [sql for sql in statements if sql.startswith("SELECT key, value")] == []
    store.close()


def test_keys_another_connection_adds_or_deletes_change_the_whole_kept_map(
    tmp_path: Path,
) -> None:
    # A session's chunks are kept whole once read; another process rolls messages over
    # into a new chunk, or retention deletes the oldest: the next whole read has those keys.
    path = tmp_path / "flows.sqlite3"
    store, other = SqliteFlowStore(path), SqliteFlowStore(path)

    def whole() -> dict[str, str]:
        return store.read(lambda tx: tx.get_write_once_values("f1", "chunks"))

    def put(*keys: str) -> Callable[[StoreTransaction], None]:
        def write(tx: StoreTransaction) -> None:
            for key in keys:
                tx.put_value("f1", "chunks", key, f'"{key}"')

        return write

    store.run(put("00001", "00002"))
    assert whole() == {"00001": '"00001"', "00002": '"00002"'}
    assert whole() == {"00001": '"00001"', "00002": '"00002"'}  # served from what was kept
    other.run(put("00003"))
    assert whole() == {"00001": '"00001"', "00002": '"00002"', "00003": '"00003"'}
    other.run(lambda tx: tx.delete_value("f1", "chunks", "00001"))
    assert whole() == {"00002": '"00002"', "00003": '"00003"'}
    # This store kept 00001 through the other's delete: as many keys kept as the map
    # holds now, but not the same ones.
    other.run(put("00004"))
    assert whole() == {"00002": '"00002"', "00003": '"00003"', "00004": '"00004"'}
    other.close()
    store.close()


def test_a_write_once_value_read_in_the_transaction_that_wrote_it_is_not_kept(
    tmp_path: Path,
) -> None:
    # A commit reads back what it wrote (the hand-off reads the next Step's state).
    # Were that kept and the transaction rolled back, this store would serve a value
    # that was never stored.
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")

    def write_read_and_fail(tx: StoreTransaction) -> None:
        tx.put_value("f1", "chunks", "00001", '"never stored"')
        assert tx.get_write_once_values("f1", "chunks") == {"00001": '"never stored"'}
        raise RuntimeError("the commit fails after its reads")

    with pytest.raises(RuntimeError, match="after its reads"):
        store.run(write_read_and_fail)
    assert store.read(lambda tx: tx.get_value("f1", "chunks", "00001")) is None
    assert store.read(lambda tx: tx.get_write_once_values("f1", "chunks", ["00001"])) == {}
    store.run(lambda tx: tx.put_value("f1", "chunks", "00001", '"stored"'))
    assert store.read(lambda tx: tx.get_write_once_values("f1", "chunks")) == {"00001": '"stored"'}
    assert store.read(lambda tx: tx.get_value("f1", "chunks", "00001")) == '"stored"'
    store.close()


def test_a_committed_write_to_a_kept_map_is_kept_as_written(tmp_path: Path) -> None:
    # A Step stores messages into the window that the next Step and the client's snapshot
    # read: they take the text it wrote, reading no row. As above, a value changed behind
    # the store's back shows which text is served.
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    store.run(lambda tx: tx.put_value("f1", "chunks", "00001", '"one"'))
    store.read(lambda tx: tx.get_write_once_values("f1", "chunks"))  # now kept
    written = json.dumps("two " * 3)

    def undone(tx: StoreTransaction) -> None:
        tx.put_value("f1", "chunks", "00003", '"undone"')
        raise RuntimeError("this work's savepoint is rolled back")

    outcomes = store.run_batch([undone, lambda tx: tx.put_value("f1", "chunks", "00002", written)])
    assert isinstance(outcomes[0].error, RuntimeError)
    with sqlite3.connect(path) as other:
        other.execute("UPDATE attribute_values SET value = '\"changed\"' WHERE name = 'chunks'")
    read = store.read(lambda tx: tx.get_write_once_values("f1", "chunks"))
    assert read == {"00001": '"one"', "00002": written}
    assert read["00002"] is written
    assert store.read(lambda tx: tx.get_value("f1", "chunks", "00003")) is None

    def write_and_fail(tx: StoreTransaction) -> None:
        tx.put_value("f1", "chunks", "00004", '"never stored"')
        raise RuntimeError("the whole transaction rolls back")

    with pytest.raises(RuntimeError, match="whole transaction"):
        store.run(write_and_fail)
    assert store.read(lambda tx: tx.get_value("f1", "chunks", "00004")) is None
    # A delete is forgotten once it commits.
    store.run(lambda tx: tx.delete_value("f1", "chunks", "00002"))
    assert store.read(lambda tx: tx.get_write_once_values("f1", "chunks")) == {"00001": '"one"'}
    store.close()


def test_an_update_of_a_row_read_in_the_transaction_sets_only_what_changed(
    tmp_path: Path,
) -> None:
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")
    add_flows(store, flow("f1"))
    (row_id,) = add_executions(store, execution())

    def update(tx: StoreTransaction) -> None:
        row = tx.get_execution(row_id)
        assert row is not None
        tx.update_execution(replace(row, attempt=2, lease_owner="w1"))

    try:
        with traced_statements(store) as statements:
            store.run(update)
    finally:
        store.close()
    updates = [sql for sql in statements if sql.startswith("UPDATE step_executions")]
    assert updates == [
        f"UPDATE step_executions SET attempt = 2, lease_owner = 'w1' WHERE id = {row_id}"
    ]


def test_an_ended_transaction_is_freed_without_a_garbage_collection(tmp_path: Path) -> None:
    # A transaction and its Stream part referred to each other, so each one, several a turn,
    # stayed alive with its dicts and sets until a collection, and made collections come
    # twice as often.
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")
    add_flows(store, flow("f1"))
    ended: list[weakref.ref[StoreTransaction]] = []

    def write(tx: StoreTransaction) -> int:
        ended.append(weakref.ref(tx))
        return tx.append_event("Agent", "f1", "1", "s", at(1))

    def read(tx: StoreTransaction) -> int:
        ended.append(weakref.ref(tx))
        return len(tx.events_after("f1", 0, 10))

    gc.disable()
    try:
        store.run(write)
        assert store.read(read) == 1
        assert [ref() for ref in ended] == [None, None]
    finally:
        gc.enable()
        store.close()
