"""A SQLite store transaction skips the statements that would change nothing.

A Step writes back what it staged whether or not it changed, and deletes values
that may be unset; a commit's Stream events add to the Stream's size once. What
the file holds must still be exactly what every write said, whichever
connection wrote last and whatever a savepoint undid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import at
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteFlowStore]:
    with sqlite_store_with_a_flow(tmp_path) as store:
        yield store


def _writes(statements: list[str], table: str) -> int:
    verbs = ("INSERT", "UPDATE", "DELETE")
    return sum(1 for sql in statements if sql.lstrip().startswith(verbs) and table in sql)


def _stored(path: Path, name: str, key: str = "") -> str | None:
    # Another connection reads the file, so nothing this store kept answers for it.
    other = SqliteFlowStore(path)
    try:
        return other.read(lambda tx: tx.get_value("f1", name, key))
    finally:
        other.close()


def test_a_value_written_again_unchanged_runs_no_statement(store: SqliteFlowStore) -> None:
    store.run(lambda tx: tx.put_value("f1", "A", "", '"x"'))
    with traced_statements(store) as statements:
        store.run(lambda tx: tx.put_value("f1", "A", "", '"x"'))
    assert _writes(statements, "attribute_values") == 0
    with traced_statements(store) as statements:
        store.run(lambda tx: tx.put_value("f1", "A", "", '"y"'))
    assert _writes(statements, "attribute_values") == 1
    assert _stored(store.path, "A") == '"y"'


def test_a_delete_of_a_value_known_unset_runs_no_statement(store: SqliteFlowStore) -> None:
    assert store.run(lambda tx: tx.get_value("f1", "B", "")) is None  # now known unset
    with traced_statements(store) as statements:
        store.run(lambda tx: tx.delete_value("f1", "B", ""))
    assert _writes(statements, "attribute_values") == 0


def test_a_delete_of_a_value_not_known_still_runs(store: SqliteFlowStore) -> None:
    store.run(lambda tx: tx.put_value("f1", "M", "k1", '"v"'))  # a map instance, not kept
    with traced_statements(store) as statements:
        store.run(lambda tx: tx.delete_value("f1", "M", "k1"))
    assert _writes(statements, "attribute_values") == 1
    assert _stored(store.path, "M", "k1") is None


def test_a_map_instance_read_whole_and_written_unchanged_runs_no_statement(
    store: SqliteFlowStore,
) -> None:
    store.run(lambda tx: tx.put_value("f1", "M", "k1", '"v"'))
    assert store.run(lambda tx: tx.get_values("f1", "M")) == {"k1": '"v"'}
    with traced_statements(store) as statements:
        store.run(lambda tx: tx.put_value("f1", "M", "k1", '"v"'))
        store.run(lambda tx: tx.delete_value("f1", "M", "k2"))
    assert _writes(statements, "attribute_values") == 0


def test_a_write_another_connection_made_since_is_overwritten(store: SqliteFlowStore) -> None:
    store.run(lambda tx: tx.put_value("f1", "A", "", '"x"'))
    other = SqliteFlowStore(store.path)
    try:
        other.run(lambda tx: tx.put_value("f1", "A", "", '"other"'))
    finally:
        other.close()
    # This store kept "x", but the file moved on: writing "x" again must reach it.
    store.run(lambda tx: tx.put_value("f1", "A", "", '"x"'))
    assert _stored(store.path, "A") == '"x"'


def test_a_write_a_savepoint_undid_is_not_taken_for_the_stored_value(
    store: SqliteFlowStore,
) -> None:
    store.run(lambda tx: tx.put_value("f1", "A", "", '"x"'))

    def undone(tx: StoreTransaction) -> None:
        tx.put_value("f1", "A", "", '"y"')
        raise ValueError("undo it")

    def rewritten(tx: StoreTransaction) -> None:
        tx.put_value("f1", "A", "", '"y"')

    outcomes = store.run_batch([undone, rewritten])
    assert isinstance(outcomes[0].error, ValueError)
    assert _stored(store.path, "A") == '"y"'


def _stream_bytes(store: SqliteFlowStore) -> int:
    connection = store._connection  # stream_sizes is the store's own bookkeeping
    assert connection is not None
    row = connection.execute("SELECT bytes FROM stream_sizes WHERE flow_type = 'T'").fetchone()
    return 0 if row is None else int(row[0])


def test_the_events_of_one_commit_add_to_the_streams_size_once(store: SqliteFlowStore) -> None:
    def append(tx: StoreTransaction) -> None:
        for text in ('"a"', '"bb"', '"ccc"'):
            tx.append_event("T", "f1", text, "s", at(1))
        tx.trim_events("T", 1024)

    with traced_statements(store) as statements:
        store.run(append)
    assert _writes(statements, "stream_sizes") == 1
    assert _stream_bytes(store) == 3 + 4 + 5


def test_the_events_of_a_batch_add_to_the_streams_size_once(store: SqliteFlowStore) -> None:
    def append(text: str) -> Callable[[StoreTransaction], None]:
        def work(tx: StoreTransaction) -> None:
            tx.append_event("T", "f1", text, "s", at(1))
            assert tx.trim_events("T", 1024) == 0  # as a Step's commit does: frees nothing

        return work

    def nested(tx: StoreTransaction) -> None:
        assert tx.run_undoable(lambda: append('"dddd"')(tx)).error is None

    with traced_statements(store) as statements:
        store.run_batch([append('"a"'), append('"bb"'), nested, append('"ccc"')])
    assert _writes(statements, "stream_sizes") == 1
    assert _stream_bytes(store) == 3 + 4 + 6 + 5


def test_a_trim_of_events_of_the_same_transaction_counts_them_first(
    store: SqliteFlowStore,
) -> None:
    def append_and_trim(tx: StoreTransaction) -> int:
        for text in ('"a"', '"bb"', '"ccc"'):
            tx.append_event("T", "f1", text, "s", at(1))
        return tx.trim_events("T", 5)

    assert store.run(append_and_trim) == 2
    assert _stream_bytes(store) == 5
    assert [event.value for event in store.run(lambda tx: tx.events_after("f1", 0, 10))] == [
        '"ccc"'
    ]


def test_a_trim_a_savepoint_undid_leaves_the_earlier_works_bytes_to_count(
    store: SqliteFlowStore,
) -> None:
    def appended(tx: StoreTransaction) -> None:
        tx.append_event("T", "f1", '"a"', "s", at(1))

    def trimmed_then_undone(tx: StoreTransaction) -> None:
        tx.append_event("T", "f1", '"undone"', "s", at(2))
        assert tx.trim_events("T", 1024) == 0  # saves the sizes of both works so far
        raise ValueError("undo it")

    store.run_batch([appended, trimmed_then_undone])
    assert _stream_bytes(store) == 3
    assert store.run(lambda tx: tx.trim_events("T", 3)) == 0
    assert store.run(lambda tx: tx.trim_events("T", 2)) == 1


def test_events_appended_without_a_trim_still_count(store: SqliteFlowStore) -> None:
    store.run(lambda tx: tx.append_event("T", "f1", '"a"', "s", at(1)))
    assert _stream_bytes(store) == 3


def test_events_a_savepoint_undid_do_not_count(store: SqliteFlowStore) -> None:
    def undone(tx: StoreTransaction) -> None:
        tx.append_event("T", "f1", '"undone"', "s", at(1))
        raise ValueError("undo it")

    def kept(tx: StoreTransaction) -> None:
        tx.append_event("T", "f1", '"kept"', "s", at(2))

    store.run_batch([undone, kept])
    assert _stream_bytes(store) == 6
    # The size the store then keeps in memory agrees with the file: trimming to 6 frees nothing.
    assert store.run(lambda tx: tx.trim_events("T", 6)) == 0
    assert store.run(lambda tx: tx.trim_events("T", 5)) == 1


def test_events_of_a_released_savepoint_count_only_if_the_one_around_it_commits(
    store: SqliteFlowStore,
) -> None:
    def inner(tx: StoreTransaction, text: str) -> None:
        tx.append_event("T", "f1", text, "s", at(1))

    def undone(tx: StoreTransaction) -> None:
        assert tx.run_undoable(lambda: inner(tx, '"inner"')).error is None
        raise ValueError("undo the savepoint around it")

    def kept(tx: StoreTransaction) -> None:
        assert tx.run_undoable(lambda: inner(tx, '"kept"')).error is None

    store.run_batch([undone, kept])
    assert _stream_bytes(store) == 6
