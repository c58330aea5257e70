"""A store transaction that SQLite rolled back after an error runs no statement on its own.

On some errors (an I/O error, a full disk, an interrupted write) SQLite rolls the whole
transaction back and the connection is in autocommit mode again: each statement the
work still ran committed alone, and its ``COMMIT`` then failed. A work that took such
an error for another (``claims.take`` took every error of its state read for a damaged
value until 2026-12-07) left writes in the file that the failed transaction was
meant to make only together with the ones SQLite undid.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore, StoreError
from dex_agents.adapters.local.sqlite_transaction import SqliteTransaction
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import add_flows, flow


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteFlowStore]:
    made = SqliteFlowStore(tmp_path / "flows.sqlite3")
    add_flows(made, flow("f1"))
    yield made
    made.close()


@contextlib.contextmanager
def _interrupting(tx: StoreTransaction) -> Iterator[None]:
    # A progress handler that says stop interrupts the statement running, and SQLite rolls
    # back the whole transaction of an interrupted write: a real rollback by SQLite itself.
    assert isinstance(tx, SqliteTransaction)
    connection = tx._connection  # the test makes SQLite itself roll back
    assert connection is not None
    connection.set_progress_handler(lambda: 1, 1)
    try:
        yield
    finally:
        connection.set_progress_handler(None, 1)


def test_a_statement_after_sqlite_rolled_the_transaction_back_raises(
    store: SqliteFlowStore,
) -> None:
    def work(tx: StoreTransaction) -> None:
        tx.put_value("f1", "A", "", '"first"')
        # The interrupted write's error is taken for one that leaves the transaction as it was.
        with _interrupting(tx), contextlib.suppress(sqlite3.OperationalError):
            tx.put_value("f1", "B", "", '"interrupted"')
        tx.put_value("f1", "C", "", '"after"')

    with pytest.raises(StoreError, match="rolled the transaction back"):
        store.run(work)
    # Before, C was committed on its own, without the A it was written with.
    assert store.read(lambda tx: tx.get_values("f1", "C")) == {}
    assert store.read(lambda tx: tx.get_value("f1", "A", "")) is None
    # The store works on.
    store.run(lambda tx: tx.put_value("f1", "C", "", '"again"'))
    assert store.read(lambda tx: tx.get_value("f1", "C", "")) == '"again"'
