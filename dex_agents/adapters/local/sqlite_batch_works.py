"""How ``SqliteFlowStore.run_batch`` keeps one work's failure apart from the others'.

Several works run in one transaction, each in a savepoint of its own; a lone
work runs with none, and what it raises is set apart from a failure of SQLite
itself, which fails the whole commit.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from dex_agents.adapters.local.store_errors import StoreCorruptError, StoredValueError
from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction

R = TypeVar("R")


class WorkRaised(Exception):
    """A lone work of a batch raised ``error``: the batch's outcome, not the store's failure."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def in_file(error: Exception, path: Path) -> Exception:
    """What a work raised, as the store says it: a stored value that did not decode names
    the file too (``StoreCorruptError``), as ``SqliteFlowStore.run`` says it."""
    if not isinstance(error, StoredValueError):
        return error
    named = StoreCorruptError(f"{path} is damaged: {error}")
    named.__cause__ = error
    return named


def raising_apart(
    work: Callable[[StoreTransaction], R], path: Path
) -> Callable[[StoreTransaction], R]:
    """``work``, with what it raises set apart from a failure of SQLite itself, which the
    store translates and raises, as a batch in savepoints does."""

    def apart(tx: StoreTransaction) -> R:
        try:
            return work(tx)
        except sqlite3.Error:
            raise
        except Exception as error:
            raise WorkRaised(in_file(error, path)) from None

    return apart


def each_in_savepoint(
    works: Sequence[Callable[[StoreTransaction], Any]], path: Path
) -> Callable[[StoreTransaction], list[BatchOutcome]]:
    """One transaction's work that runs ``works`` in order, each in a savepoint of its own."""

    def each(tx: StoreTransaction) -> list[BatchOutcome]:
        outcomes = [tx.run_undoable(functools.partial(work, tx)) for work in works]
        return [
            outcome
            if outcome.error is None
            else replace(outcome, error=in_file(outcome.error, path))
            for outcome in outcomes
        ]

    return each
