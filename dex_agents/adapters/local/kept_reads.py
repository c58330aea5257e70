"""A read served from what the store's connection keeps, in a transaction only once it needs one.

Most reads (a client's snapshot of its session) are served from the rows the
connection keeps (``known_rows``) alone: they then cost one statement, the
``PRAGMA data_version`` that says the kept rows still hold, not a transaction's
four. A read that needs a statement begins its transaction at that statement,
and ``data_version`` is read again in it:

- when the work used something kept before, the snapshot must be the one the
  kept rows were checked at: if another connection committed in between, the
  work is dropped and runs again in a transaction of its own;
- when it used nothing kept before (a Stream read starts with its statement),
  the kept rows are checked in the transaction, as any transaction's are, and
  nothing is read before it: a client beside a worker process checked them
  first and then again, 5.7 of its 7.4 reads a turn.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Callable
from typing import TypeVar

from dex_agents.adapters.local.flow_changes import runs_changed_after
from dex_agents.adapters.local.known_rows import KnownRows
from dex_agents.adapters.local.sqlite_transaction import SqliteTransaction
from dex_agents.ports.flow_store import StoreTransaction

R = TypeVar("R")

Transaction = Callable[[Callable[[], None], Callable[[], None]], SqliteTransaction]
"""Makes the read's transaction from its ``begin`` (before its first statement) and its
``look`` (before its first use of the kept rows, unless a statement came first)."""


def read_kept(
    connection: sqlite3.Connection,
    known: KnownRows,
    work: Callable[[StoreTransaction], R],
    transaction: Transaction,
    patience: Callable[[], None],
) -> tuple[bool, R | None]:
    """Run read-only ``work`` with no transaction until its first statement; ``(False, None)``
    when it must run in a transaction from the start (the kept rows no longer hold).

    ``patience`` sets the connection's busy timeout for a read, before its ``BEGIN``.
    """
    looked: list[int] = []  # the data_version the kept rows were found to hold at

    def data_version() -> int:
        version: int = connection.execute("PRAGMA data_version").fetchone()[0]
        return version

    def look() -> None:
        try:
            version = data_version()
        except sqlite3.Error:
            raise _SnapshotMoved from None  # the transaction's read says why, waiting its time
        if not known.holds_version(version):
            raise _SnapshotMoved
        looked.append(version)

    def begin() -> None:
        patience()
        connection.execute("BEGIN DEFERRED")
        version = data_version()
        if not looked:
            # Nothing kept was used yet: checked against this snapshot, as in any transaction.
            known.begin(version, functools.partial(runs_changed_after, connection.execute))
        elif version != looked[0]:
            raise _SnapshotMoved

    tx = transaction(begin, look)
    try:
        value = work(tx)
        if connection.in_transaction:
            connection.execute("COMMIT")
        return True, value
    except _SnapshotMoved:
        return False, None
    finally:
        if connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
        tx.end()


class _SnapshotMoved(BaseException):
    """The kept rows no longer hold, or another connection committed between their check and
    the read's first statement. A ``BaseException``, so that no ``except Exception`` in the
    work keeps it from running again."""
