"""A worker's writes take the time they commit at, not the time they were asked for.

A write may wait: behind another process's write lock, or for a retry after the
store was busy (by default the busy timeout is as long as a lease). A claim
round or a lease renewal timed from before that wait would lease from a time
already past, and another worker would take over an attempt that still runs.
The engine's clock here is a test's own, moved on while the write waits.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import ExecutionRow
from tests.adapters.engine_flows import HeldFlow, running_worker

LEASE = timedelta(seconds=10)


class Clock:
    """The engine's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def _running_row(engine: LocalEngine, flow_id: str) -> ExecutionRow:
    rows = await engine.read(lambda tx: tx.flow_executions(flow_id))
    assert len(rows) == 1
    return rows[0]


async def test_a_claim_round_that_waited_for_the_write_lock_leases_from_when_it_commits(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flows.sqlite3"
    flow, clock = HeldFlow(), Clock()
    store = SqliteFlowStore(path, busy_timeout=timedelta(milliseconds=100))
    engine = LocalEngine(store, [flow], lease_duration=LEASE, clock=clock)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        await LocalFlowClient(engine).start_flow(flow, "f1", None)  # no worker yet to take it
        other.execute("BEGIN IMMEDIATE")  # another process's write holds the lock
        async with running_worker(engine):
            # The worker's first round waits for the lock, and is tried again while busy.
            await asyncio.sleep(0.5)
            assert not flow.held.started.is_set()
            clock.now += timedelta(minutes=5)
            other.execute("COMMIT")
            async with asyncio.timeout(20):
                await flow.held.started.wait()
            # Leased until a time already past, the attempt would be taken over by the next
            # round, which the commit that claimed it wakes.
            await asyncio.sleep(0.3)
            assert flow.held.attempts == [1]
            row = await _running_row(engine, "f1")
            assert row.lease_expires_at == clock.now + LEASE
            flow.held.release.set()
    finally:
        other.close()
        engine.close()
        store.close()


async def test_a_lease_renewal_that_waited_for_the_write_lock_renews_from_when_it_commits(
    tmp_path: Path,
) -> None:
    # A worker renews its leases every third of a lease: here at 4 s, 8 s, ... of its run.
    path = tmp_path / "flows.sqlite3"
    flow, clock = HeldFlow(), Clock()
    lease = timedelta(seconds=12)
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [flow], lease_duration=lease, clock=clock)
    other = sqlite3.connect(path, isolation_level=None)
    loop = asyncio.get_running_loop()
    try:
        began = loop.time()
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", None)
            async with asyncio.timeout(20):
                await flow.held.started.wait()
            claimed = (await _running_row(engine, "f1")).lease_expires_at
            other.execute("BEGIN IMMEDIATE")  # another process's write holds the lock
            # The first renewal is asked for at 4 s and waits for the lock; then time moves on.
            await asyncio.sleep(began + 5 - loop.time())
            clock.now += timedelta(minutes=5)
            other.execute("COMMIT")
            # Timed from when it was asked, it would renew to the lease the claim gave, already
            # past: the full round at 6 s would take the running attempt over.
            async with asyncio.timeout(3):
                while (await _running_row(engine, "f1")).lease_expires_at == claimed:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            await asyncio.sleep(began + 7 - loop.time())  # past that round
            row = await _running_row(engine, "f1")
            assert (row.attempt, flow.held.attempts) == (1, [1])
            assert row.lease_expires_at == clock.now + lease
            flow.held.release.set()
    finally:
        other.close()
        engine.close()
        store.close()
