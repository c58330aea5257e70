"""A live-event flush the attempt's end stops while its commit is on its way: when the
store then fails that commit, its events still reach the Stream with the result."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.store_errors import StoreBusyError
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.engine import RetryPolicy, Step, StepDecision, StepOptions, complete
from dex_agents.ports.flow_rows import FlowStatus
from dex_agents.ports.flow_store import (
    BatchOutcome,
    StoreTransaction,
    StoreWouldWaitError,
    run_each,
)
from dex_agents.ports.step_contexts import StepContext
from tests.adapters.engine_flows import EVENTS, OneStepFlow, run_until
from tests.support.flow_runs import wait_for_status

R = TypeVar("R")


class FirstEventsFail(MemoryFlowStore):
    """A memory store whose first transaction that writes the Stream event ``first`` waits for ``fail``,
    then fails as a commit that meets a busy disk does: nothing it wrote stays."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.fail = threading.Event()

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        def failing(tx: StoreTransaction) -> R:
            before = tx.last_event_id("f1")
            result = work(tx)
            written = [event.value for event in tx.events_after("f1", before, 100)]
            if written == ['"first"'] and not self.entered.is_set():
                self.entered.set()
                self.fail.wait(timeout=20)
                raise StoreBusyError("the store was busy at the commit")
            return result

        return super().run(failing, durable=durable)

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        return run_each(self.run, works)

    def try_run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        # Until the flush's commit is in, commits go to the store thread, where that one
        # can wait for the test without stopping the event loop.
        if not self.entered.is_set():
            raise StoreWouldWaitError("the test holds the loop's commits")
        return super().try_run_batch(works, durable=durable)


class Streams(Step[None]):
    store: FirstEventsFail

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        context.write_event(EVENTS, "first")
        entered: bool = await wait_until("the flush's commit", self.store.entered.is_set)
        assert entered
        # The flush's commit fails once the attempt's end has stopped its flusher.
        self.store.fail.set()
        return complete()


async def test_a_flush_stopped_mid_commit_that_then_fails_keeps_its_events() -> None:
    store = FirstEventsFail()
    Streams.store = store
    flow = OneStepFlow("Streams", Streams(), EVENTS)
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    await run_until(engine, flow, FlowStatus.COMPLETED)
    events = engine.store.read(lambda tx: tx.events_after("f1", 0, 100))
    # Before, the attempt's end cancelled the flusher while its commit was queued, and the
    # commit's failure reached nobody: "first" was in neither that commit nor the result's.
    assert [event.value for event in events] == ['"first"']
    engine.close()
    await asyncio.sleep(0)


class BeatsPastItsTimeout(Step[None]):
    """Writes the event ``first`` and sends a heartbeat, which carries it; the execute timeout
    stops the attempt while that heartbeat's commit is on its way, and the store then fails
    that commit."""

    store: FirstEventsFail

    def options(self) -> StepOptions:
        return StepOptions(
            execute_timeout=timedelta(milliseconds=100), retry=RetryPolicy(maximum_attempts=1)
        )

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        context.write_event(EVENTS, "first")
        try:
            await context.heartbeat()
        except asyncio.CancelledError:
            self.store.fail.set()
            raise
        return complete()


async def test_a_heartbeat_the_execute_timeout_stops_mid_commit_that_then_fails_keeps_its_events() -> (
    None
):
    store = FirstEventsFail()
    BeatsPastItsTimeout.store = store
    flow = OneStepFlow("Beats", BeatsPastItsTimeout(), EVENTS)
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    await run_until(engine, flow, FlowStatus.FAILED)
    assert store.entered.is_set()
    (row,) = engine.store.read(lambda tx: [tx.get_flow("f1")])
    assert row is not None
    assert row.failure_reason is not None
    assert "StepTimeoutError" in row.failure_reason
    events = engine.store.read(lambda tx: tx.events_after("f1", 0, 100))
    # Before, the timeout cancelled the attempt's own heartbeat, which ran in the attempt's
    # task, and the commit's failure reached nobody: the failed attempt's live event was lost.
    assert [event.value for event in events] == ['"first"']
    engine.close()
    await asyncio.sleep(0)


class FallsSilent(Step[None]):
    """Sends a heartbeat, writes the event ``last`` and then sends no heartbeat again: the
    worker stops it past its heartbeat timeout, with ``last`` still waiting for its flush."""

    def options(self) -> StepOptions:
        return StepOptions(
            heartbeat_timeout=timedelta(milliseconds=100), retry=RetryPolicy(maximum_attempts=1)
        )

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        await context.heartbeat()
        context.write_event(EVENTS, "last")
        await asyncio.Event().wait()  # a call that hangs; only the worker stops it
        return complete()


async def test_an_attempt_the_heartbeat_timeout_stops_keeps_its_buffered_events() -> None:
    store = MemoryFlowStore()
    flow = OneStepFlow("Silent", FallsSilent(), EVENTS)
    # Renewals, which look for silent attempts, every 100 ms; a flush that never comes first.
    engine = LocalEngine(
        store,
        [flow],
        poll_interval=timedelta(milliseconds=20),
        lease_duration=timedelta(seconds=0.3),
    )
    client = LocalFlowClient(engine)
    worker = LocalWorker(engine, event_flush_interval=timedelta(minutes=10))
    running = asyncio.create_task(worker.run())
    try:
        await client.start_flow(flow, "f1", None)
        await wait_for_status(client, "f1", FlowStatus.FAILED)
    finally:
        await worker.stop()
        await running
    (row,) = store.read(lambda tx: [tx.get_flow("f1")])
    assert row is not None
    assert row.failure_reason is not None
    assert "HeartbeatTimeoutError" in row.failure_reason
    events = store.read(lambda tx: tx.events_after("f1", 0, 100))
    # Before, the attempt's stop dropped them: a failed attempt keeps its live events, as
    # one that raised does.
    assert [event.value for event in events] == ['"last"']
    engine.close()
