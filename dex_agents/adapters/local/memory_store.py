"""An in-memory ``FlowStore``: one process's Flow runs, with the SQLite store's semantics but no durability.

A transaction applies its writes to the live tables at once and records how to
undo each (``memory_transaction``); when ``work`` raises, the undo log runs
backwards, so a rollback costs what the transaction changed, never a copy of
the whole store. One re-entrant lock serializes transactions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dex_agents.adapters.local.memory_transaction import MemoryTables, MemoryTransaction
from dex_agents.ports.flow_store import (
    BatchOutcome,
    StoreTransaction,
    StoreWouldWaitError,
    run_each,
)

R = TypeVar("R")


class MemoryFlowStore:
    """A ``FlowStore`` in this process's memory: for tests and throwaway runs; nothing survives it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tables: MemoryTables | None = MemoryTables()
        self._in_run = False
        self._commits = 0

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        """Run ``work`` in one transaction; undo every write it made if it raises.

        Nothing here reaches a disk, so ``durable`` changes nothing.
        """
        with self._lock:
            if self._tables is None:
                raise RuntimeError("the memory flow store is closed")
            if self._in_run:
                raise RuntimeError("FlowStore.run cannot run inside another transaction's work")
            tx = MemoryTransaction(self._tables)
            self._in_run = True
            try:
                result = work(tx)
            except BaseException:
                for undo in reversed(tx.undo):
                    undo()
                raise
            finally:
                tx.end()
                self._in_run = False
            if tx.undo:
                self._commits += 1
            return result

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        """Run each work as a transaction of its own; a work that raises undoes only itself."""
        return run_each(self.run, works)

    def read(self, work: Callable[[StoreTransaction], R]) -> R:
        """Run read-only ``work``; a write in it is undone and raises ``RuntimeError``."""

        def checked(tx: StoreTransaction) -> R:
            result = work(tx)
            if isinstance(tx, MemoryTransaction) and tx.undo:
                raise RuntimeError("FlowStore.read work must not write")
            return result

        return self.run(checked)

    def try_run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        """``run_batch``, unless another thread is in a transaction: then ``StoreWouldWaitError``."""
        self._hold_now()
        try:
            return self.run_batch(works, durable=durable)
        finally:
            self._lock.release()

    def try_read(self, work: Callable[[StoreTransaction], R]) -> R:
        """``read``, unless another thread is in a transaction: then ``StoreWouldWaitError``."""
        self._hold_now()
        try:
            return self.read(work)
        finally:
            self._lock.release()

    def _hold_now(self) -> None:
        """Take the store's lock now, or raise ``StoreWouldWaitError``; the caller releases it.

        A method and ``try``/``finally`` at its callers, not a ``contextmanager``: its
        generator cost 10 K instructions a call, about 7 to 10 a turn.
        """
        if not self._lock.acquire(blocking=False):
            raise StoreWouldWaitError("another thread is in a transaction of the memory store")

    def change_counter(self) -> int:
        """The number of committed transactions that wrote something."""
        return self._commits

    def close(self) -> None:
        """Drop every stored row; the store takes no transaction afterwards."""
        with self._lock:
            if self._in_run:
                raise RuntimeError("a flow store cannot be closed inside a transaction's work")
            self._tables = None
