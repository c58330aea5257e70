"""A state-only Step runs in the commit that made it runnable (``in_commit``), on both stores.

The Flow here is Start -> Decide -> Finish. ``Decide`` is state-only in
``InCommitFlow`` and an ordinary Step in ``OrdinaryFlow``; its input picks how it
behaves. A store wrapper counts the durable write transactions, so the commit
that was saved is counted, not assumed.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar, TypeVar

import pytest

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.in_commit import MOST_RUNS_PER_COMMIT
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.engine import Rpc, RpcResult, Step, StepDecision, complete, go_to
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus, FlowStatus
from dex_agents.ports.flow_store import BatchOutcome, FlowStore, StoreTransaction
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.step_contexts import RpcContext, StepContext
from tests.adapters.engine_flows import LOG, append_log, running_worker
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE

R = TypeVar("R")

NOTES: StreamDef[str] = StreamDef("Notes", str, 1024 * 1024)


class DurableCounter:
    """A ``FlowStore`` that passes everything on and counts its durable write transactions."""

    def __init__(self, inner: FlowStore) -> None:
        self.inner = inner
        self.durable_writes = 0

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        self.durable_writes += durable
        return self.inner.run(work, durable=durable)

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        self.durable_writes += durable
        return self.inner.run_batch(works, durable=durable)

    def read(self, work: Callable[[StoreTransaction], R]) -> R:
        return self.inner.read(work)

    def change_counter(self) -> int:
        return self.inner.change_counter()

    def close(self) -> None:
        self.inner.close()


class Start(Step[str]):
    input_type = str
    decides: ClassVar[type[Step[str]]]

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        append_log(context, "start")
        return go_to(self.decides, input)


class Decide(Step[str]):
    """``plain`` logs and writes a live event; ``suspend`` awaits the loop first;
    ``suspend-and-clean-up`` awaits it again as it cleans up (stopped at its first await,
    it refuses to close); ``flaky`` raises on its first attempt; ``beat`` sends a
    heartbeat; ``loop:<n>`` goes to itself n more times."""

    input_type = str
    state_only = True
    runs: ClassVar[collections.Counter[str]] = collections.Counter()

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        Decide.runs[input] += 1
        if input == "suspend":
            await asyncio.sleep(0)
        if input == "suspend-and-clean-up":
            try:
                await asyncio.sleep(0)
            finally:
                await asyncio.sleep(0)
        if input == "flaky" and context.attempt == 1:
            raise RuntimeError("the first attempt fails")
        if input == "beat":
            await context.heartbeat()
        append_log(context, f"decide:{input}")
        context.write_event(NOTES, f"decided {input}")
        if input.startswith("loop:") and int(input[5:]) > 0:
            return go_to(type(self), f"loop:{int(input[5:]) - 1}")
        return go_to(Finish)


class OrdinaryDecide(Decide):
    """The same Step, not state-only: its worker runs it in a task of its own."""

    step_type = "Decide"
    state_only = False


class OrdinaryStart(Start):
    step_type = "Start"
    decides = OrdinaryDecide


Start.decides = Decide


class Finish(Step[None]):
    async def execute(self, context: StepContext, input: None) -> StepDecision:
        append_log(context, "finish")
        return complete("done")


def _read_log(context: RpcContext, _: None) -> RpcResult[tuple[str, ...]]:
    return RpcResult(context.state.get(LOG) or ())


class InCommitFlow:
    flow_type = "InCommit"
    start_step: Step[Any] = Start()
    steps: Sequence[Step[Any]] = (start_step, Decide(), Finish())
    schema: Sequence[Any] = (LOG,)
    stream: StreamDef[Any] | None = NOTES
    rpcs: Mapping[str, Rpc[Any, Any]] = {
        "read_log": Rpc("read_log", type(None), tuple[str, ...], _read_log)
    }


class OrdinaryFlow(InCommitFlow):
    flow_type = "Ordinary"
    start_step: Step[Any] = OrdinaryStart()
    steps: Sequence[Step[Any]] = (start_step, OrdinaryDecide(), Finish())


class DecideFirstFlow(InCommitFlow):
    """Decide first: a claim round (a start with no worker of the client's process) takes it."""

    flow_type = "DecideFirst"
    start_step: Step[Any] = Decide()
    steps: Sequence[Step[Any]] = (start_step, Finish())


class OrdinaryDecideFirstFlow(InCommitFlow):
    flow_type = "OrdinaryDecideFirst"
    start_step: Step[Any] = OrdinaryDecide()
    steps: Sequence[Step[Any]] = (start_step, Finish())


class Conclude(Step[str]):
    """State-only, and ends its Flow run: a claim round that takes it leaves nothing to start."""

    input_type = str
    state_only = True

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        return complete(input)


class ConcludeFlow(InCommitFlow):
    flow_type = "Conclude"
    start_step: Step[Any] = Conclude()
    steps: Sequence[Step[Any]] = (start_step,)


@pytest.fixture
def counted(store: FlowStore) -> Iterator[tuple[DurableCounter, LocalEngine]]:
    Decide.runs.clear()
    counter = DurableCounter(store)
    flows = [InCommitFlow(), OrdinaryFlow(), DecideFirstFlow(), OrdinaryDecideFirstFlow()]
    # A Decide that raises retries at a hundredth of its policy's interval.
    engine = LocalEngine(counter, flows, retry_interval_scale=RETRY_INTERVAL_SCALE)
    try:
        yield counter, engine
    finally:
        engine.close()


async def _run(engine: LocalEngine, flow_type: str, flow_id: str, input: str) -> None:
    """Start a Flow run and run a worker until it completes (20 s at most)."""
    client = LocalFlowClient(engine)
    await client.start_flow(engine.flow(flow_type).flow, flow_id, input)
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(20):
            while await _status(engine, flow_id) is not FlowStatus.COMPLETED:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    finally:
        await worker.stop()
        await task


async def _one_commit_saved(
    store: DurableCounter,
    engine: LocalEngine,
    in_commit: str,
    ordinary: str,
    log: tuple[str, ...],
) -> None:
    """Run a ``plain`` Flow of type ``in_commit`` as ``s1``, then of type ``ordinary`` as
    ``s2``: the same log and events, and one durable write transaction fewer for ``s1``."""
    runs = ((in_commit, "s1"), (ordinary, "s2"))
    writes = []
    for flow_type, flow_id in runs:
        before = store.durable_writes
        await _run(engine, flow_type, flow_id, "plain")
        writes.append(store.durable_writes - before)
    assert writes[1] - writes[0] == 1
    for flow_type, flow_id in runs:
        assert await _log(engine, flow_type, flow_id) == (*log, "finish")
        assert await _events(engine, flow_id) == ['"decided plain"']


async def _status(engine: LocalEngine, flow_id: str) -> FlowStatus | None:
    def status(tx: StoreTransaction) -> FlowStatus | None:
        row = tx.get_flow(flow_id)
        return None if row is None else row.status

    return await engine.read(status)


async def _executions(engine: LocalEngine, flow_id: str) -> list[ExecutionRow]:
    return list(await engine.read(lambda tx: tx.flow_executions(flow_id)))


async def _events(engine: LocalEngine, flow_id: str) -> list[str]:
    rows = await engine.read(lambda tx: tx.events_after(flow_id, 0, 100))
    return [row.value for row in rows]


async def _log(engine: LocalEngine, flow_type: str, flow_id: str) -> tuple[str, ...]:
    client = LocalFlowClient(engine)
    log: tuple[str, ...] = await client.invoke_rpc(
        engine.flow(flow_type).flow, flow_id, "read_log", None
    )
    return log


async def test_a_state_only_step_commits_with_the_step_that_made_it_runnable(
    counted: tuple[DurableCounter, LocalEngine],
) -> None:
    store, engine = counted
    # Start, Decide and Finish each committed a result; Decide's shared Start's commit.
    await _one_commit_saved(store, engine, "InCommit", "Ordinary", ("start", "decide:plain"))
    rows = {row.step_type: row for row in await _executions(engine, "s1")}
    # Its own execution, completed at its first attempt in the instant Start's commit did.
    decide, start = rows["Decide"], rows["Start"]
    assert decide.status is ExecutionStatus.COMPLETED
    assert decide.attempt == 1
    assert decide.finished_at == start.finished_at
    assert Decide.runs["plain"] == 2  # once per Flow run: nothing ran twice


@pytest.mark.parametrize("behaviour", ["suspend", "suspend-and-clean-up", "beat"])
async def test_a_step_that_suspends_is_left_to_its_worker(
    counted: tuple[DurableCounter, LocalEngine], behaviour: str
) -> None:
    _, engine = counted
    await _run(engine, "InCommit", "s1", behaviour)
    rows = {row.step_type: row for row in await _executions(engine, "s1")}
    # Tried in Start's commit, undone there, then run to the end by the worker.
    assert Decide.runs[behaviour] == 2
    assert rows["Decide"].finished_at != rows["Start"].finished_at
    assert await _log(engine, "InCommit", "s1") == ("start", f"decide:{behaviour}", "finish")
    assert await _events(engine, "s1") == [f'"decided {behaviour}"']


async def test_a_step_that_raises_in_the_commit_gets_its_retry_policy_from_the_worker(
    counted: tuple[DurableCounter, LocalEngine],
) -> None:
    _, engine = counted
    await _run(engine, "InCommit", "s1", "flaky")
    decide = next(row for row in await _executions(engine, "s1") if row.step_type == "Decide")
    # The try in Start's commit is no attempt: the worker's first attempt raised again,
    # the second completed.
    assert decide.attempt == 2
    assert decide.status is ExecutionStatus.COMPLETED
    assert Decide.runs["flaky"] == 3
    assert await _log(engine, "InCommit", "s1") == ("start", "decide:flaky", "finish")


async def test_one_commit_runs_a_bounded_number_of_state_only_steps(
    counted: tuple[DurableCounter, LocalEngine],
) -> None:
    _, engine = counted
    await _run(engine, "InCommit", "s1", "loop:9")
    rows = await _executions(engine, "s1")
    decides = [row for row in rows if row.step_type == "Decide"]
    assert len(decides) == 10
    assert all(row.status is ExecutionStatus.COMPLETED for row in decides)
    per_commit = collections.Counter(row.finished_at for row in rows)
    # The Step that committed, and at most MOST_RUNS_PER_COMMIT that ran in its commit.
    assert max(per_commit.values()) == MOST_RUNS_PER_COMMIT + 1


async def test_a_state_only_step_a_claim_round_takes_runs_in_the_round_s_commit(
    counted: tuple[DurableCounter, LocalEngine],
) -> None:
    # Started with no worker in the client's process (as a client process beside worker
    # processes starts a turn), Decide is claimed by the worker's claim round.
    store, engine = counted
    await _one_commit_saved(store, engine, "DecideFirst", "OrdinaryDecideFirst", ("decide:plain",))
    decide = next(row for row in await _executions(engine, "s1") if row.step_type == "Decide")
    assert decide.status is ExecutionStatus.COMPLETED
    assert decide.attempt == 1
    assert Decide.runs["plain"] == 2  # once per Flow run


async def test_a_claim_round_that_filled_its_slots_with_steps_it_ran_claims_again_at_once(
    store: FlowStore,
) -> None:
    # Five runs started with no worker of the client's process (as a client process starts
    # sessions beside worker processes). The worker has two slots, and would look again by
    # itself only after an hour: each round ran the two Steps it claimed in its commit and
    # left nothing to start, and the rest waited for that look.
    flow = ConcludeFlow()
    engine = LocalEngine(
        store,
        [flow],
        poll_interval=timedelta(hours=1),
        lease_duration=timedelta(hours=2),
    )
    try:
        client = LocalFlowClient(engine)
        flow_ids = [f"s{n}" for n in range(5)]
        for flow_id in flow_ids:
            await client.start_flow(flow, flow_id, "done")
        async with running_worker(engine, max_concurrent_tasks=2):
            for flow_id in flow_ids:
                while await _status(engine, flow_id) is not FlowStatus.COMPLETED:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        for flow_id in flow_ids:
            (row,) = await _executions(engine, flow_id)
            assert (row.status, row.attempt) == (ExecutionStatus.COMPLETED, 1)
    finally:
        engine.close()


async def test_a_step_that_suspends_in_a_claim_round_is_left_to_its_worker(
    counted: tuple[DurableCounter, LocalEngine],
) -> None:
    _, engine = counted
    await _run(engine, "DecideFirst", "s1", "suspend")
    # Tried in the round's commit, undone there, then run to the end by the worker.
    assert Decide.runs["suspend"] == 2
    assert await _log(engine, "DecideFirst", "s1") == ("decide:suspend", "finish")
    assert await _events(engine, "s1") == ['"decided suspend"']
