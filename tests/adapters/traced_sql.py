"""The SQL statements a ``SqliteFlowStore`` runs, for tests whose point is what it reads."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore


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
