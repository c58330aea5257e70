"""Time this process's SQLite write transactions: how long each waited for the lock, how long it held it.

``record_write_transactions()`` wraps ``SqliteFlowStore.run``, ``run_batch`` and
``try_run_batch`` for the rest of the process. Each write transaction appends
``(waited, held)``: from the call until its work began (the store's own lock,
the turnstile and ``BEGIN IMMEDIATE``, so mostly the wait for SQLite's write
lock), and from then until ``COMMIT`` returned (the work and the commit: the
time the write lock was held; a durable commit's fsync runs after that, once
the lock is free, ``wal_sync.py``). A try on the event loop's thread that
found the lock taken began nothing; the wait of the transaction that then ran
on the store thread counts from that try.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.wal_sync import WalSync
from dex_agents.ports.flow_store import StoreTransaction, StoreWouldWaitError


def record_write_transactions() -> list[tuple[float, float]]:
    """Start timing every write transaction of this process; the list fills as they run."""
    timings: list[tuple[float, float]] = []
    # When the first try that found the lock taken was made, until a transaction begins.
    refused: list[float] = []
    # When each sync began: the store's lock keeps one call in it at a time, so the syncs
    # after a call's start are its own.
    synced: list[float] = []
    sync = WalSync.sync

    def timed_sync(wal: WalSync) -> None:
        synced.append(time.perf_counter())
        sync(wal)

    def begun(work: Callable[[StoreTransaction], Any], began: list[float]) -> Callable[..., Any]:
        def run(tx: StoreTransaction) -> Any:
            if not began:
                began.append(time.perf_counter())
            return work(tx)

        return run

    def timed(method: Callable[..., Any], batch: bool) -> Callable[..., Any]:
        @functools.wraps(method)
        def run(store: SqliteFlowStore, work: Any, *args: Any, **kwargs: Any) -> Any:
            called, began = time.perf_counter(), list[float]()
            syncs_before = len(synced)
            works: Sequence[Any] = work if batch else [work]
            wrapped = [begun(each, began) for each in works]
            try:
                return method(store, wrapped if batch else wrapped[0], *args, **kwargs)
            except StoreWouldWaitError:
                if not refused:
                    refused.append(called)
                raise
            finally:
                ended = synced[syncs_before] if len(synced) > syncs_before else time.perf_counter()
                if began:
                    since = refused.pop() if refused else called
                    timings.append((began[0] - since, ended - began[0]))

        return run

    SqliteFlowStore.run = timed(SqliteFlowStore.run, batch=False)  # type: ignore[method-assign]
    SqliteFlowStore.run_batch = timed(SqliteFlowStore.run_batch, batch=True)  # type: ignore[method-assign]
    SqliteFlowStore.try_run_batch = timed(SqliteFlowStore.try_run_batch, batch=True)  # type: ignore[method-assign]
    WalSync.sync = timed_sync  # type: ignore[method-assign,assignment]
    return timings
