"""The SQL statements a ``SqliteFlowStore`` runs, for tests whose point is what it reads."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from tests.adapters.flow_store_rows import add_flows, flow


@contextlib.contextmanager
def traced_statements(store: SqliteFlowStore) -> Iterator[list[str]]:
    """Every statement ``store``'s connection runs inside the ``with``, in order."""
    statements: list[str] = []
    connection = store._connection  # the statements it runs are the point of such tests
    assert connection is not None
    connection.set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        connection.set_trace_callback(None)


@contextlib.contextmanager
def sqlite_store_with_a_flow(folder: Path) -> Iterator[SqliteFlowStore]:
    """A ``SqliteFlowStore`` in ``folder`` holding one running Flow run, ``f1``."""
    store = SqliteFlowStore(folder / "flows.sqlite3")
    add_flows(store, flow("f1"))
    try:
        yield store
    finally:
        store.close()
