"""The reads one pass of the event loop asks for run in one read transaction, and each still
gets what it would alone: its value, its own error, or nothing once cancelled."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import FlowRow
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import add_flows, flow, write_held_open
from tests.adapters.traced_sql import traced_statements

FLOWS = [f"f{n}" for n in range(8)]


class ItsOwnError(Exception):
    """What one read's work raises."""


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowStore]:
    store: FlowStore
    store = (
        SqliteFlowStore(tmp_path / "flows.sqlite3")
        if request.param == "sqlite"
        else MemoryFlowStore()
    )
    add_flows(store, *(flow(flow_id) for flow_id in FLOWS))
    try:
        yield store
    finally:
        if isinstance(store, SqliteFlowStore):
            store.close()


def _flow_of(flow_id: str) -> Callable[[StoreTransaction], FlowRow | None]:
    return lambda tx: tx.get_flow(flow_id)


def _raising(tx: StoreTransaction) -> None:
    tx.get_flow("f0")
    raise ItsOwnError("this read's own")


async def _each(
    engine: LocalEngine, works: Sequence[Callable[[StoreTransaction], object]]
) -> list[object]:
    return await asyncio.gather(*(engine.read(work) for work in works), return_exceptions=True)


def test_reads_asked_for_in_one_pass_begin_one_transaction(tmp_path: Path) -> None:
    store = SqliteFlowStore(tmp_path / "flows.sqlite3")
    add_flows(store, *(flow(flow_id) for flow_id in FLOWS))
    engine = LocalEngine(store, [])

    def events_of(flow_id: str) -> Callable[[StoreTransaction], object]:
        return lambda tx: (flow_id, list(tx.events_after(flow_id, 0, 10)))

    try:
        # Stream reads, which no kept row answers: alone, each began a transaction.
        with traced_statements(store) as statements:
            outcomes = asyncio.run(_each(engine, [events_of(flow_id) for flow_id in FLOWS]))
        assert outcomes == [(flow_id, []) for flow_id in FLOWS]
        assert [sql for sql in statements if sql.startswith("BEGIN")] == ["BEGIN DEFERRED"]
        assert statements.count("COMMIT") == 1
    finally:
        engine.close()
        store.close()


def test_a_read_that_raises_gets_its_own_error_and_the_others_their_values(
    store: FlowStore,
) -> None:
    engine = LocalEngine(store, [])
    try:
        works = [_flow_of("f1"), _raising, _flow_of("f2"), _raising, _flow_of("f3")]
        outcomes = asyncio.run(_each(engine, works))
    finally:
        engine.close()
    assert [getattr(each, "flow_id", None) for each in outcomes] == ["f1", None, "f2", None, "f3"]
    assert [type(each) for each in outcomes[1::2]] == [ItsOwnError, ItsOwnError]


def _noted(ran: list[str], flow_id: str) -> Callable[[StoreTransaction], FlowRow | None]:
    """A read of ``flow_id`` that notes in ``ran`` each time it runs."""

    def work(tx: StoreTransaction) -> FlowRow | None:
        ran.append(flow_id)
        return tx.get_flow(flow_id)

    return work


def test_a_read_cancelled_before_its_pass_leaves_the_queue_and_the_others(
    store: FlowStore,
) -> None:
    engine = LocalEngine(store, [])
    ran: list[str] = []
    noted = functools.partial(_noted, ran)

    async def main() -> list[object]:
        alone = asyncio.create_task(engine.read(noted("f1")))
        await asyncio.sleep(0)  # queued, not run yet
        alone.cancel()
        outcomes: list[object] = [*await asyncio.gather(alone, return_exceptions=True)]
        # A cancelled read another caller's round took may run, and its caller still learns
        # it was cancelled; one no round took is gone from the queue, so no later pass runs it.
        tasks = [asyncio.create_task(engine.read(noted(flow_id))) for flow_id in FLOWS[2:5]]
        await asyncio.sleep(0)
        tasks[1].cancel()
        outcomes += [*await asyncio.gather(*tasks, return_exceptions=True)]
        outcomes.append(await engine.read(noted("f7")))
        return outcomes

    try:
        outcomes = asyncio.run(main())
    finally:
        engine.close()
    assert [type(outcomes[n]) for n in (0, 2)] == [asyncio.CancelledError] * 2
    flow_ids = [getattr(each, "flow_id", None) for each in outcomes]
    assert flow_ids == [None, "f2", None, "f4", "f7"]
    assert "f1" not in ran
    assert ran[-1] == "f7"


def test_reads_that_find_the_store_busy_wait_for_it_and_each_run_once(
    store: FlowStore,
) -> None:
    engine = LocalEngine(store, [])
    ran: list[str] = []
    noted = functools.partial(_noted, ran)

    async def main() -> list[object]:
        with write_held_open(store):
            reads = asyncio.gather(*(engine.read(noted(flow_id)) for flow_id in FLOWS[:7]))
            await asyncio.sleep(0.05)  # each found the store busy and waits on its thread
            assert not reads.done()
        outcomes: list[object] = [*await reads]
        # Nothing stays queued of them: the next pass runs its own read alone.
        outcomes.append(await engine.read(noted("f7")))
        return outcomes

    try:
        outcomes = asyncio.run(main())
    finally:
        engine.close()
    assert [getattr(each, "flow_id", None) for each in outcomes] == FLOWS
    assert sorted(ran) == FLOWS


def test_a_pass_reads_a_commit_made_before_its_reads_were_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    add_flows(store, flow("f0"))
    other = SqliteFlowStore(path)
    engine = LocalEngine(store, [])

    async def main() -> list[object]:
        first = await _each(engine, [_flow_of("f0"), _flow_of("late")])
        other.run(lambda tx: tx.insert_flow(flow("late")))
        return [*first, *await _each(engine, [_flow_of("f0"), _flow_of("late")])]

    try:
        outcomes = asyncio.run(main())
    finally:
        engine.close()
        other.close()
        store.close()
    assert [getattr(each, "flow_id", None) for each in outcomes] == ["f0", None, "f0", "late"]


def test_a_read_that_writes_raises_in_a_round_as_alone(store: FlowStore) -> None:
    engine = LocalEngine(store, [])

    def writes(tx: StoreTransaction) -> str:
        tx.put_value("f0", "noted", "", '"x"')
        return "wrote"

    try:
        # The memory store finds the write once every work of the transaction has run.
        outcomes = asyncio.run(_each(engine, [_flow_of("f1"), writes, _flow_of("f2")]))
    finally:
        engine.close()
    assert [getattr(each, "flow_id", None) for each in outcomes] == ["f1", None, "f2"]
    assert isinstance(outcomes[1], RuntimeError)
    assert str(outcomes[1]) == "FlowStore.read work must not write"
    assert store.read(lambda tx: tx.get_value("f0", "noted", "")) is None
