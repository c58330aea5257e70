"""Rows and writes the ``FlowStore`` contract tests build on: fixed times, Flow runs, executions."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus, FlowRow, FlowStatus
from dex_agents.ports.flow_store import FlowStore, StoreTransaction

T0 = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def flow(flow_id: str, status: FlowStatus = FlowStatus.RUNNING, created: float = 0) -> FlowRow:
    return FlowRow(
        flow_id=flow_id,
        flow_type="Agent",
        run_id=f"run-{flow_id}",
        status=status,
        input='{"q": 1}',
        created_at=at(created),
    )


def execution(flow_id: str = "f1", step_type: str = "Step", **changes: Any) -> ExecutionRow:
    row = ExecutionRow(
        flow_id=flow_id,
        step_type=step_type,
        step_execution_id=f"{step_type}-1",
        input="null",
        status=ExecutionStatus.READY,
        created_at=T0,
    )
    return replace(row, **changes)


def add_flows(store: FlowStore, *rows: FlowRow) -> None:
    def work(tx: StoreTransaction) -> None:
        for row in rows:
            tx.insert_flow(row)

    store.run(work)


def add_executions(store: FlowStore, *rows: ExecutionRow) -> list[int]:
    return store.run(lambda tx: [tx.insert_execution(row) for row in rows])


@contextlib.contextmanager
def write_held_open(
    store: FlowStore, first: Callable[[StoreTransaction], None] | None = None
) -> Iterator[None]:
    """For the body, a write transaction of ``store`` in another thread holds the write lock.

    ``first`` runs in that transaction before it waits; nothing is committed
    until the body ends.
    """
    holding, release = threading.Event(), threading.Event()

    def hold(tx: StoreTransaction) -> None:
        if first is not None:
            first(tx)
        holding.set()
        release.wait()

    thread = threading.Thread(target=store.run, args=(hold,))
    thread.start()
    try:
        assert holding.wait(10), "the holding transaction never began"
        yield
    finally:
        release.set()
        thread.join()


@contextlib.contextmanager
def held_flock(path: Path, kind: int = fcntl.LOCK_EX) -> Iterator[Callable[[], None]]:
    """For the body, an ``flock`` of ``kind`` on ``path`` (a store's ``-writers`` or
    ``-clients`` file) as another writer would hold it; the body may call the
    function it gets to let go early."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
        yield lambda: fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def clients_seen_waiting(database: Path) -> bool:
    """Whether a client's writer waits on ``database`` as a worker's writer checks it: the
    clients' file is held shared (``WriterTurnstile``)."""
    try:
        with held_flock(database.with_name(database.name + "-clients")):
            return False
    except BlockingIOError:
        return True
