"""The ``FlowStore`` contract for group commits and one-query snapshot reads, on both stores.

``run_batch`` commits independent works together; ``durable=False`` commits
without an fsync but keeps everything else; ``get_singletons`` and
``pending_counts`` answer in one read what a Step's snapshot needs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local.store_errors import StoreError
from dex_agents.ports.flow_store import BatchOutcome, FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import add_flows, at, flow
from tests.adapters.traced_sql import sqlite_store_with_a_flow, traced_statements


def _put(name: str, value: str) -> Callable[[StoreTransaction], str]:
    def work(tx: StoreTransaction) -> str:
        tx.put_value("f1", name, "", value)
        return value

    return work


def _failing(tx: StoreTransaction) -> None:
    tx.put_value("f1", "b", "", "never")
    tx.append_message("f1", "inbox", "", "lost", "1", at(1))
    raise ValueError("this work fails alone")


def test_a_batch_undoes_only_the_work_that_raised(store: FlowStore) -> None:
    add_flows(store, flow("f1"))
    counter = store.change_counter()
    works: list[Callable[[StoreTransaction], Any]] = [_put("a", "1"), _failing, _put("c", "3")]
    outcomes = store.run_batch(works)
    assert [outcome.value for outcome in outcomes] == ["1", None, "3"]
    assert outcomes[0].error is None
    assert outcomes[2].error is None
    assert isinstance(outcomes[1].error, ValueError)
    assert str(outcomes[1].error) == "this work fails alone"
    assert store.change_counter() != counter

    def read(tx: StoreTransaction) -> tuple[object, ...]:
        return (
            tx.get_value("f1", "a", ""),
            tx.get_value("f1", "b", ""),
            tx.get_value("f1", "c", ""),
            tx.pending_messages("f1", "inbox", ""),
        )

    assert store.read(read) == ("1", None, "3", [])


@pytest.mark.parametrize("tries", [False, True], ids=["run_batch", "try_run_batch"])
def test_a_batch_of_one_work_that_raises_gets_its_error_and_writes_nothing(
    store: FlowStore, tries: bool
) -> None:
    add_flows(store, flow("f1"))
    run_batch = getattr(store, "try_run_batch" if tries else "run_batch")
    (outcome,) = run_batch([_failing])
    assert outcome.value is None
    assert isinstance(outcome.error, ValueError)
    assert str(outcome.error) == "this work fails alone"
    (after,) = run_batch([_put("a", "1")])
    assert after.value == "1"

    def read(tx: StoreTransaction) -> tuple[object, ...]:
        return (
            tx.get_value("f1", "a", ""),
            tx.get_value("f1", "b", ""),
            tx.pending_messages("f1", "inbox", ""),
        )

    assert store.read(read) == ("1", None, [])


def test_only_a_batch_of_more_than_one_work_uses_savepoints(tmp_path: Path) -> None:
    with sqlite_store_with_a_flow(tmp_path) as store:
        with traced_statements(store) as alone:
            store.try_run_batch([_put("a", "1")])
        with traced_statements(store) as failed:
            store.try_run_batch([_failing])
        with traced_statements(store) as two:
            store.try_run_batch([_put("a", "2"), _put("c", "3")])
    assert not [statement for statement in alone if "SAVEPOINT" in statement]
    assert alone[-1] == "COMMIT"
    # A lone work's failure is its transaction's: rolled back, not committed empty.
    assert "ROLLBACK" in failed
    assert "COMMIT" not in failed
    assert [statement for statement in two if statement.startswith("SAVEPOINT")] == [
        "SAVEPOINT work_0",
        "SAVEPOINT work_0",
    ]


def test_a_failure_of_sqlite_in_a_lone_work_is_the_stores_error(tmp_path: Path) -> None:
    def broken(tx: StoreTransaction) -> None:
        tx.put_value("f1", "b", "", "never")
        raise sqlite3.OperationalError("disk I/O error")

    with sqlite_store_with_a_flow(tmp_path) as store:
        with pytest.raises(StoreError, match="disk I/O error"):
            store.run_batch([broken])
        assert store.read(lambda tx: tx.get_value("f1", "b", "")) is None


def test_a_later_work_of_a_batch_sees_the_earlier_ones(store: FlowStore) -> None:
    add_flows(store, flow("f1"))

    def doubles(tx: StoreTransaction) -> str:
        value = str(int(tx.get_value("f1", "n", "") or "0") * 2)
        tx.put_value("f1", "n", "", value)
        return value

    outcomes = store.run_batch([_put("n", "21"), doubles])
    assert [outcome.value for outcome in outcomes] == ["21", "42"]


def test_a_commit_without_fsync_is_still_a_commit(store: FlowStore) -> None:
    add_flows(store, flow("f1"))
    counter = store.change_counter()
    store.run(lambda tx: tx.put_value("f1", "soft", "", "kept"), durable=False)
    assert store.change_counter() != counter
    assert store.read(lambda tx: tx.get_value("f1", "soft", "")) == "kept"
    # A durable commit after it works as before (it is synced; test_wal_sync.py).
    store.run(lambda tx: tx.put_value("f1", "hard", "", "kept"))
    assert store.read(lambda tx: tx.get_value("f1", "hard", "")) == "kept"


def test_a_soft_commit_that_raises_writes_nothing(store: FlowStore) -> None:
    add_flows(store, flow("f1"))
    with pytest.raises(ValueError, match="fails alone"):
        store.run(_failing, durable=False)
    assert store.read(lambda tx: tx.get_value("f1", "b", "")) is None


def test_singletons_and_channel_sizes_in_one_read(store: FlowStore) -> None:
    add_flows(store, flow("f1"), flow("f2"))

    def fill(tx: StoreTransaction) -> None:
        tx.put_value("f1", "one", "", "1")
        tx.put_value("f1", "two", "", "2")
        tx.put_value("f1", "map", "k", "an instance, not a singleton")
        tx.put_value("f2", "one", "", "other session")
        for n in range(3):
            tx.append_message("f1", "inbox", "", f"m{n}", "x", at(n))
        tx.append_message("f1", "keyed", "k", "mk", "x", at(4))
        tx.append_message("f2", "inbox", "", "m-other", "x", at(5))
        first = tx.pending_messages("f1", "inbox", "")[0]
        tx.consume_messages([first.seq])

    store.run(fill)
    singletons = store.read(lambda tx: tx.get_singletons("f1", ["one", "two", "map", "unset"]))
    assert singletons == {"one": "1", "two": "2"}
    counts = store.read(lambda tx: tx.pending_counts("f1", ["inbox", "keyed", "empty"]))
    assert counts == {"inbox": 2}
    assert store.read(lambda tx: tx.get_singletons("f1", [])) == {}
    assert store.read(lambda tx: tx.pending_counts("f1", [])) == {}


def test_an_undoable_work_that_raises_undoes_only_itself_inside_its_transaction(
    store: FlowStore,
) -> None:
    add_flows(store, flow("f1"))

    def work(tx: StoreTransaction) -> tuple[object, ...]:
        tx.put_value("f1", "before", "", "kept")
        kept = tx.run_undoable(lambda: _put("inner", "kept too")(tx))
        undone = tx.run_undoable(lambda: _failing(tx))
        # Nested: the inner failure undoes the inner work only, the outer one keeps its write.

        def outer() -> BatchOutcome:
            tx.put_value("f1", "outer", "", "kept")
            return tx.run_undoable(lambda: _failing(tx))

        nested = tx.run_undoable(outer)
        return kept.value, undone.error, nested.error, nested.value.error

    kept, undone, nested, inner = store.run(work)
    assert kept == "kept too"
    assert isinstance(undone, ValueError)
    assert nested is None
    assert isinstance(inner, ValueError)

    def read(tx: StoreTransaction) -> tuple[object, ...]:
        return (
            tx.get_value("f1", "before", ""),
            tx.get_value("f1", "inner", ""),
            tx.get_value("f1", "outer", ""),
            tx.get_value("f1", "b", ""),
            tx.pending_messages("f1", "inbox", ""),
        )

    assert store.read(read) == ("kept", "kept too", "kept", None, [])
