"""How ``SqliteFlowStore.run_batch`` keeps one work's failure apart from the others'.

Several works run in one transaction, each in a savepoint of its own; a lone
work runs with none, and what it raises is set apart from a failure of SQLite
itself, which fails the whole commit.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction

R = TypeVar("R")


class WorkRaised(Exception):
    """A lone work of a batch raised ``error``: the batch's outcome, not the store's failure."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def raising_apart(work: Callable[[StoreTransaction], R]) -> Callable[[StoreTransaction], R]:
    """``work``, with what it raises set apart from a failure of SQLite itself, which the
    store translates and raises, as a batch in savepoints does."""

    def apart(tx: StoreTransaction) -> R:
        try:
            return work(tx)
        except sqlite3.Error:
            raise
        except Exception as error:
            raise WorkRaised(error) from None

    return apart


def each_in_savepoint(
    works: Sequence[Callable[[StoreTransaction], Any]],
) -> Callable[[StoreTransaction], list[BatchOutcome]]:
    """One transaction's work that runs ``works`` in order, each in a savepoint of its own."""

    def each(tx: StoreTransaction) -> list[BatchOutcome]:
        return [tx.run_undoable(functools.partial(work, tx)) for work in works]

    return each
