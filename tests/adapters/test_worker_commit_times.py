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
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.engine import Rpc, Step, StepContext, StepDecision, complete
from dex_agents.ports.flow_store import ExecutionRow
from dex_agents.ports.persistence import StreamDef
from tests.adapters.engine_flows import running_worker

LEASE = timedelta(seconds=10)


class Blocked(Step[None]):
    """Runs until the test releases it."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.attempts: list[int] = []

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.attempts.append(context.attempt)
        self.started.set()
        await self.release.wait()
        return complete(None)


class BlockedFlow:
    """One Step that blocks."""

    def __init__(self) -> None:
        self.step = Blocked()
        self.start_step: Step[Any] = self.step
        self.steps: Sequence[Step[Any]] = (self.step,)

    flow_type = "Blocked"
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}


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
    flow, clock = BlockedFlow(), Clock()
    store = SqliteFlowStore(path, busy_timeout=timedelta(milliseconds=100))
    engine = LocalEngine(store, [flow], lease_duration=LEASE, clock=clock)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        await LocalFlowClient(engine).start_flow(flow, "f1", None)  # no worker yet to take it
        other.execute("BEGIN IMMEDIATE")  # another process's write holds the lock
        async with running_worker(engine):
            # The worker's first round waits for the lock, and is tried again while busy.
            await asyncio.sleep(0.5)
            assert not flow.step.started.is_set()
            clock.now += timedelta(minutes=5)
            other.execute("COMMIT")
            async with asyncio.timeout(20):
                await flow.step.started.wait()
            # Leased until a time already past, the attempt would be taken over by the next
            # round, which the commit that claimed it wakes.
            await asyncio.sleep(0.3)
            assert flow.step.attempts == [1]
            row = await _running_row(engine, "f1")
            assert row.lease_expires_at == clock.now + LEASE
            flow.step.release.set()
    finally:
        other.close()
        engine.close()
        store.close()
