"""A claim whose read of the Step's state meets a store fault fails visibly, and the Step
is claimed again once the fault has cleared.

``claims.take`` leases a Step with no snapshot only when a stored value is damaged:
that session fails alone and the commit that leases it still commits. Until
2026-12-07 it did so for any error of that read: an I/O error (after which SQLite
may have rolled the transaction back, so what the commit wrote next ran outside it)
passed unseen, and the worker never logged the fault. So did the same read where a
commit decides a new Step's wait (``inline_waits.decide_wait_now``).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dex_agents.adapters.local import claims
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.inline_waits import decide_wait_now
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore, StoreError
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import BatchOutcome, StoreTransaction
from dex_agents.ports.step_waits import ChannelCondition, Wait
from tests.adapters.engine_flows import INBOX, EngineTestFlow, running_worker

R = TypeVar("R")
LEASE = timedelta(minutes=1)


class FailingStateRead:
    """A transaction whose read of ``f1``'s singleton Attributes fails with a disk I/O error
    while its store's fault is armed; everything else is the real transaction's."""

    def __init__(self, tx: StoreTransaction, store: FaultyReads) -> None:
        self._tx = tx
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    def get_singletons(self, flow_id: str, names: Sequence[str]) -> dict[str, str]:
        if flow_id == "f1" and self._store.faults > 0:
            self._store.faults -= 1
            raise sqlite3.OperationalError("disk I/O error")
        return self._tx.get_singletons(flow_id, names)


class FaultyReads(SqliteFlowStore):
    """The SQLite store, whose next ``faults`` reads of ``f1``'s state fail with an I/O error."""

    faults = 0

    def _faulty(self, work: Callable[[StoreTransaction], R]) -> Callable[[StoreTransaction], R]:
        return lambda tx: work(FailingStateRead(tx, self))

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        return super().run(self._faulty(work), durable=durable)

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        return super().run_batch([self._faulty(work) for work in works], durable=durable)

    def try_run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        return super().try_run_batch([self._faulty(work) for work in works], durable=durable)


@pytest.fixture
def flow() -> EngineTestFlow:
    return EngineTestFlow()


@pytest.fixture
def engine(tmp_path: Path, flow: EngineTestFlow) -> Iterator[LocalEngine]:
    store = FaultyReads(tmp_path / "flows.sqlite3")
    made = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    yield made
    made.close()
    store.close()


def _faulty(engine: LocalEngine) -> FaultyReads:
    assert isinstance(engine.store, FaultyReads)
    return engine.store


async def test_a_claim_whose_state_read_fails_leases_nothing(
    engine: LocalEngine, flow: EngineTestFlow
) -> None:
    await LocalFlowClient(engine).start_flow(flow, "f1", "x")
    _faulty(engine).faults = 1
    now = engine.now()

    def claim(tx: StoreTransaction) -> list[claims.Claim]:
        return claims.claim(tx, engine.flows, "me", now, LEASE, 1)

    # Before, the claim leased the Step with no snapshot and its commit went through.
    with pytest.raises(StoreError, match="disk I/O error"):
        await engine.run(claim)
    (row,) = await engine.read(lambda tx: tx.flow_executions("f1"))
    assert (row.status, row.lease_owner) == (ExecutionStatus.READY, None)
    # Once the fault has cleared, the next claim takes the Step with the state it read.
    (taken,) = await engine.run(claim)
    assert taken.row.id == row.id
    assert taken.snapshot is not None


async def test_a_worker_logs_the_fault_and_runs_the_step_once_it_clears(
    engine: LocalEngine, flow: EngineTestFlow, caplog: pytest.LogCaptureFixture
) -> None:
    client = LocalFlowClient(engine)
    await client.start_flow(flow, "f1", "x")
    _faulty(engine).faults = 1
    caplog.set_level(logging.ERROR, logger="dex_agents.engine")
    async with running_worker(engine):

        async def started() -> bool:
            log: tuple[str, ...] = await client.invoke_rpc(flow, "f1", "read_log", None)
            return log == ("start:x",)

        ran: bool = await wait_until("the start Step's commit", started)
        assert ran
    assert _faulty(engine).faults == 0
    # Before, the fault passed unseen: the round committed as if nothing had happened.
    assert any("disk I/O error" in record.getMessage() for record in caplog.records)
    # The Step ran once, as its first attempt, on the state the later claim read.
    assert list(flow.probe.attempts.values()) == [[1]]


async def test_a_wait_decided_in_a_commit_whose_state_read_fails_fails_that_commit(
    engine: LocalEngine, flow: EngineTestFlow
) -> None:
    # The same read, where a commit that creates a Step decides its wait (``inline_waits``).
    await LocalFlowClient(engine).start_flow(flow, "f1", "x")
    now = engine.now()
    waiting = ExecutionRow(
        flow_id="f1",
        step_type="AwaitMessage",
        step_execution_id="AwaitMessage-1",
        input="null",
        status=ExecutionStatus.PENDING_WAIT,
        created_at=now,
    )
    registered = engine.registered(flow)

    def decide(tx: StoreTransaction) -> Wait | None:
        return decide_wait_now(tx, registered, waiting, now)

    _faulty(engine).faults = 1
    # Before, the read's error was taken for damaged state and the commit went on.
    with pytest.raises(StoreError, match="disk I/O error"):
        await engine.run(decide)
    assert _faulty(engine).faults == 0
    assert await engine.run(decide) == Wait.until(ChannelCondition(INBOX))
