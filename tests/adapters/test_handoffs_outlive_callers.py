"""A commit that leases Steps to this process's worker starts them whatever its caller does.

A client's commit (an RPC, a new run) or an attempt's result may hand what it made
runnable straight to the worker (``LocalWorker.commit_handing_off``,
``_handing_off``). The commit lands once it is queued: a caller cancelled meanwhile
(a request dropped, an ``asyncio.timeout``) must not leave those Steps leased to
nobody until the lease lapses, and a worker that stops meanwhile must hand them back,
not run them beside the worker that takes them over. Leases here last an hour and
polls come hourly, so only the hand-off itself can run a Step within a test.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.flow_store import FlowStore
from tests.adapters.engine_flows import EngineTestFlow, HeldFlow, running_worker

HOUR = timedelta(hours=1)


async def _log(client: LocalFlowClient, flow: EngineTestFlow, flow_id: str) -> tuple[str, ...]:
    log: tuple[str, ...] = await client.invoke_rpc(flow, flow_id, "read_log", None)
    return log


async def _logged(client: LocalFlowClient, flow: EngineTestFlow, flow_id: str, line: str) -> None:
    # The log is in the store, which no Event watches: poll it.
    async with asyncio.timeout(20):
        while line not in await _log(client, flow, flow_id):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def _commit_queued(engine: LocalEngine) -> None:
    # No Event says that a commit joined the engine's queue: look at each round of the loop.
    async with asyncio.timeout(20):
        while not engine._commits._queued:  # noqa: ASYNC110
            await asyncio.sleep(0)


async def test_an_rpc_cancelled_while_its_commit_is_queued_still_starts_what_it_handed_off(
    store: FlowStore,
) -> None:
    flow = EngineTestFlow()
    engine = LocalEngine(store, [flow], poll_interval=HOUR, lease_duration=HOUR)
    client = LocalFlowClient(engine)
    try:
        async with running_worker(engine):
            await client.start_flow(flow, "s1", "x")
            await _logged(client, flow, "s1", "start:x")  # now waiting for a message
            send = asyncio.create_task(client.invoke_rpc(flow, "s1", "send", "hello"))
            await _commit_queued(engine)
            send.cancel()  # the caller gives up; its commit goes on
            with pytest.raises(asyncio.CancelledError):
                await send
            await _logged(client, flow, "s1", "message:hello")
    finally:
        engine.close()


async def test_a_hand_off_that_commits_as_its_worker_stops_is_handed_back_not_run(
    tmp_path: Path,
) -> None:
    # The new run's commit waits behind another process's write while the worker stops:
    # the worker must not run what the commit leases to it once it has stopped, and what
    # it never started goes back at once to the worker that comes next.
    path = tmp_path / "flows.sqlite3"
    flow = EngineTestFlow()
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [flow], poll_interval=HOUR, lease_duration=HOUR)
    client = LocalFlowClient(engine)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        first = LocalWorker(engine)
        running = asyncio.create_task(first.run())
        await asyncio.sleep(0.05)  # the worker waits, the hand-off target of this engine
        other.execute("BEGIN IMMEDIATE")
        start = asyncio.create_task(client.start_flow(flow, "s1", "x"))
        await _commit_queued(engine)  # the start's commit, waiting for the lock
        await first.stop()
        other.execute("COMMIT")
        async with asyncio.timeout(20):
            await running
            await start
        await asyncio.sleep(0.1)  # a Step the stopped worker started would have logged now
        assert flow.probe.attempts == {}
        async with running_worker(engine):
            await _logged(client, flow, "s1", "start:x")
        assert flow.probe.attempts == {"Start-1": [1]}
    finally:
        other.close()
        engine.close()
        store.close()


async def test_an_attempt_cancelled_while_its_result_commits_still_starts_what_it_handed_off(
    tmp_path: Path,
) -> None:
    # A cancellation (cancel_turn, a heartbeat timeout) that reaches an attempt whose result
    # is committing cannot stop that commit; it must not stop the start of what it leased.
    path = tmp_path / "flows.sqlite3"
    flow = HeldFlow()
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [flow], poll_interval=HOUR, lease_duration=HOUR)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        async with running_worker(engine) as worker:
            await LocalFlowClient(engine).start_flow(flow, "s1", None)
            async with asyncio.timeout(20):
                await flow.held.started.wait()
            other.execute("BEGIN IMMEDIATE")  # another process's write holds the lock
            flow.held.release.set()
            await _commit_queued(engine)  # Held's result, waiting for the lock
            worker._cancel(set(worker._running))  # a cancellation comes now
            other.execute("COMMIT")
            async with asyncio.timeout(20):
                await flow.after.ran.wait()
    finally:
        other.close()
        engine.close()
        store.close()
