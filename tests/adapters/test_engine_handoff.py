"""The engine's fast paths keep its rules: hand-off, waits decided in the commit, group commit,
and RPCs tried as reads.

Each test watches the store through a ``FlowStore`` that records what the engine
asked of it (it implements the port and passes every call on), so the claim
that did not happen and the write that was not needed are seen, not assumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dex_agents.adapters.local import claims
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import DEFAULT_LEASE_DURATION, LocalEngine
from dex_agents.adapters.local.handoff import HandOff
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.adapters.local.worker_handoffs import HANDOFF_EXTRA_SLOTS
from dex_agents.ports.engine import (
    FlowDefinition,
    Rpc,
    RpcResult,
    Step,
    StepDecision,
    complete,
    go_to,
)
from dex_agents.ports.flow_rows import ExecutionStatus, FlowStatus
from dex_agents.ports.flow_store import BatchOutcome, FlowStore, StoreTransaction
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.step_contexts import RpcContext, StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Wait
from tests.adapters.engine_flows import INBOX, EngineTestFlow, Probe, running_worker
from tests.adapters.flow_store_rows import execution
from tests.adapters.flow_store_rows import flow as flow_row

R = TypeVar("R")
T = TypeVar("T")


class RecordingStore:
    """A ``FlowStore`` that passes everything on and notes claims, batches and reads."""

    def __init__(self, inner: FlowStore) -> None:
        self.inner = inner
        self.round_claims: list[str] = []
        # Claims that a commit without an fsync handed out (a claim round's or a hand-off's).
        self.soft_claims: list[str] = []
        self.rounds = 0
        self.batch_sizes: list[int] = []
        self.reads = 0
        self.writes = 0
        self.capacity_rounds: list[set[int]] = []  # the cancellations each one read

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        self.writes += 1
        result = self.inner.run(work, durable=durable)
        if not durable:
            self._note_soft_claims(result)
        if getattr(work, "func", None) is claims.claim_round:
            self.rounds += 1
            round_ = result
            assert isinstance(round_, claims.ClaimRound)
            self.round_claims += [claim.row.step_execution_id for claim in round_.claims]
        return result

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        self.writes += 1
        self.batch_sizes.append(len(works))
        self.rounds += sum(getattr(work, "func", None) is claims.claim_round for work in works)
        outcomes = self.inner.run_batch(works, durable=durable)
        if not durable:
            for outcome in outcomes:
                self._note_soft_claims(outcome.value)
        return outcomes

    def _note_soft_claims(self, result: object) -> None:
        if isinstance(result, claims.ClaimRound | HandOff):
            self.soft_claims += [claim.row.step_execution_id for claim in result.claims]

    def read(self, work: Callable[[StoreTransaction], R]) -> R:
        self.reads += 1
        result = self.inner.read(work)
        if isinstance(result, claims.ClaimRound):
            self.capacity_rounds.append(result.cancel_requested)
        return result

    def change_counter(self) -> int:
        return self.inner.change_counter()

    def close(self) -> None:
        self.inner.close()


async def _flow_status(engine: LocalEngine, flow_id: str) -> FlowStatus | None:
    def status(tx: StoreTransaction) -> FlowStatus | None:
        row = tx.get_flow(flow_id)
        return None if row is None else row.status

    return await engine.read(status)


@pytest.fixture
async def recorded(tmp_path: Path) -> AsyncIterator[tuple[RecordingStore, LocalEngine]]:
    store = RecordingStore(SqliteFlowStore(tmp_path / "engine.sqlite3"))
    flows: list[FlowDefinition] = [EngineTestFlow(), SuspendingWaitFlow(), BeatingFlow()]
    # A worker looks again within poll_interval after a quiet commit, for commits of other
    # processes; these tests count claim rounds, so that look must not fall inside one
    # on a slow machine.
    engine = LocalEngine(store, flows, poll_interval=timedelta(seconds=30))
    try:
        yield store, engine
    finally:
        engine.close()
        store.close()


async def _run_worker_until(engine: LocalEngine, done: Callable[[], Any]) -> None:
    async with running_worker(engine):
        # The state is in the store, which no Event watches: poll it.
        while not await done():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_steps_a_commit_made_runnable_are_claimed_in_that_commit(
    recorded: tuple[RecordingStore, LocalEngine],
) -> None:
    store, engine = recorded
    client = LocalFlowClient(engine)
    flow = engine.flow("EngineTest").flow
    await client.start_flow(flow, "s1", "fan-out")

    async def joined() -> bool:
        log: tuple[str, ...] = await client.invoke_rpc(flow, "s1", "read_log", None)
        return "joined:w0,w1,w2" in log

    await _run_worker_until(engine, joined)
    # Only the start Step waited for a claim round; the three Work Steps and the
    # Join (whose wait was decided in Start's commit and ended by the last Work's)
    # were leased by the commits that made them runnable.
    assert store.round_claims == ["Start-1"]
    # Every commit whose claims the worker started was synced first: a claim may rest on
    # another process's commit whose sync is still running (wal_sync.py).
    assert store.soft_claims == []


class SuspendingWait(Step[None]):
    """A Step whose ``wait_for`` awaits something real before it decides; ``decided`` counts
    the runs of it that got past the await. With ``awaits_in_cleanup`` it awaits again as it
    cleans up, so a coroutine of it stopped at its first await refuses to close."""

    decided = 0
    awaits_in_cleanup = False

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        try:
            await asyncio.sleep(0)
            SuspendingWait.decided += 1
            return Wait.until(ChannelCondition(INBOX))
        finally:
            if SuspendingWait.awaits_in_cleanup:
                await asyncio.sleep(0)

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        (message,) = context.wait_result.messages
        return complete(message)


class Begin(Step[None]):
    async def execute(self, context: StepContext, input: None) -> StepDecision:
        return go_to(SuspendingWait, None)


def _send(context: RpcContext, text: str) -> RpcResult[bool]:
    context.state.publish(INBOX, text)
    return RpcResult(True)


def _peek(context: RpcContext, _: None) -> RpcResult[int]:
    return RpcResult(context.state.channel_size(INBOX))


class SuspendingWaitFlow:
    """Begin, then a Step whose wait phase suspends; ``send`` feeds it, ``peek`` only reads."""

    flow_type = "SuspendingWait"
    start_step: Step[Any] = Begin()
    steps: Sequence[Step[Any]] = (start_step, SuspendingWait())
    schema: Sequence[Any] = (INBOX,)
    stream: StreamDef[Any] | None = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {
        "send": Rpc("send", str, bool, _send),
        "peek": Rpc("peek", type(None), int, _peek),
    }


@pytest.mark.parametrize("awaits_in_cleanup", [False, True])
async def test_a_wait_for_that_suspends_runs_in_a_wait_phase(
    recorded: tuple[RecordingStore, LocalEngine],
    monkeypatch: pytest.MonkeyPatch,
    awaits_in_cleanup: bool,
) -> None:
    # One that awaits as it cleans up made Begin's commit fail: Begin ran three times and
    # the Flow failed (until 2026-12-06).
    store, engine = recorded
    client = LocalFlowClient(engine)
    flow = engine.flow("SuspendingWait").flow
    SuspendingWait.decided = 0
    monkeypatch.setattr(SuspendingWait, "awaits_in_cleanup", awaits_in_cleanup)
    await client.start_flow(flow, "s1", None)
    assert await client.invoke_rpc(flow, "s1", "send", "hello") is True

    async def completed() -> bool:
        return await _flow_status(engine, "s1") is FlowStatus.COMPLETED

    await _run_worker_until(engine, completed)

    def output(tx: StoreTransaction) -> str | None:
        row = tx.get_flow("s1")
        return None if row is None else row.output

    assert await engine.read(output) == '"hello"'
    # Begin's commit could not decide the wait (it stopped the wait_for at its await),
    # so it leased the Step for a wait phase, which ran it to the end once.
    assert SuspendingWait.decided == 1
    assert "SuspendingWait-1" not in store.round_claims
    # The wait phase's commit handed the execute phase on, durably.
    assert store.soft_claims == []


class Beating(Step[None]):
    """Sends ten heartbeats (half of them with Stream events), then completes the Flow."""

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        for beat in range(10):
            await context.heartbeat(None if beat % 2 else f"checkpoint {beat}")
        return complete("beaten")


class BeatingFlow:
    flow_type = "Beating"
    start_step: Step[Any] = Beating()
    steps: Sequence[Step[Any]] = (start_step,)
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}


async def test_a_heartbeat_gives_the_claim_loop_nothing_to_do(
    recorded: tuple[RecordingStore, LocalEngine],
) -> None:
    store, engine = recorded
    client = LocalFlowClient(engine)
    await client.start_flow(engine.flow("Beating").flow, "s1", None)

    async def completed() -> bool:
        return await _flow_status(engine, "s1") is FlowStatus.COMPLETED

    await _run_worker_until(engine, completed)
    # The round that claimed the Step, and none for its ten heartbeats (each commits,
    # and each commit wakes the claim loop), nor for the commit that completed it.
    # This store commits on the store thread, so on a loaded machine the next heartbeat
    # can commit while the woken loop reads the counter, before the attempt has noted
    # that commit as quiet: an empty round (1 to 3 rounds in all, seen with both CPUs
    # busy). Without the quiet-commit rule there are 12: one per commit.
    assert store.round_claims == ["Beating-1"]
    assert store.rounds <= 5


@dataclass
class _OneSlotHeld:
    """A worker with one slot, held by session ``s1``'s long Step until ``release`` is set."""

    store: RecordingStore
    engine: LocalEngine
    flow: EngineTestFlow
    release: asyncio.Event


@contextlib.asynccontextmanager
async def _one_slot_held(
    path: Path,
    *,
    lease: timedelta = DEFAULT_LEASE_DURATION,
    poll: timedelta = timedelta(seconds=30),
) -> AsyncIterator[_OneSlotHeld]:
    """An engine on the file ``path`` whose worker's one slot a long Step holds, for at most
    20 s; stopped and closed on the way out."""
    store = RecordingStore(SqliteFlowStore(path))
    release = asyncio.Event()
    flow = EngineTestFlow(Probe(release=release))
    engine = LocalEngine(store, [flow], lease_duration=lease, poll_interval=poll)
    worker = LocalWorker(engine, max_concurrent_tasks=1)
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(20):
            await LocalFlowClient(engine).start_flow(flow, "s1", "long")
            while "Long-1" not in flow.probe.attempts:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            yield _OneSlotHeld(store, engine, flow, release)
    finally:
        await worker.stop()
        await task
        engine.close()
        store.close()


async def test_a_worker_with_no_free_slot_reads_its_cancellations_instead_of_a_claim_round(
    tmp_path: Path,
) -> None:
    path = tmp_path / "engine.sqlite3"
    # Leases renewed every 20 s and a full round every 30 s, so within this test only the
    # look a commit wakes can see the cancellation; another process's commit is seen
    # at the next poll.
    held = _one_slot_held(path, lease=timedelta(minutes=1), poll=timedelta(seconds=0.02))
    # Another process's client: its commits hand nothing to this process's worker.
    same_flow = EngineTestFlow()
    elsewhere = LocalEngine(SqliteFlowStore(path), [same_flow])
    client = LocalFlowClient(elsewhere)
    try:
        async with held as busy:
            store = busy.store
            rounds, looks = store.rounds, len(store.capacity_rounds)
            # Another session's start leaves a Step to claim, and wakes the claim loop,
            # whose one slot the long Step holds: it looks without the write lock.
            await client.start_flow(same_flow, "s2", "waits")
            while store.rounds == rounds and len(store.capacity_rounds) == looks:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            assert store.rounds == rounds
            # The commit that asks the long Step to stop is seen by such a look too.
            assert await client.invoke_rpc(same_flow, "s1", "cancel_long", None) is True
            while busy.flow.probe.cancelled != ["Long-1"]:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            (long,) = await busy.engine.read(
                lambda tx: [row.id for row in tx.flow_executions("s1") if row.step_type == "Long"]
            )
            # A look woken again before the cancelled attempt gives its slot back sees the
            # same request (seen once in a CI run of a loaded machine): each may, none other.
            seen = [ids for ids in store.capacity_rounds if ids]
            assert seen
            assert all(ids == {long} for ids in seen)
            # Its slot freed, the worker runs full rounds again and takes the waiting start.
            while len(busy.flow.probe.attempts["Start-1"]) < 2:  # noqa: ASYNC110 (one per session)
                await asyncio.sleep(0.01)
    finally:
        elsewhere.close()
        elsewhere.store.close()


async def test_a_worker_with_no_free_slot_still_recovers_lost_leases_on_its_cadence(
    tmp_path: Path,
) -> None:
    lease = timedelta(seconds=0.6)
    async with _one_slot_held(tmp_path / "engine.sqlite3", lease=lease) as busy:
        engine, flow = busy.engine, busy.flow
        # A Step another worker leased, whose lease runs out while this worker is busy.
        lost = execution(
            "lost",
            "Work",
            input='"x"',
            status=ExecutionStatus.RUNNING,
            lease_owner="gone",
            lease_expires_at=engine.now() + lease / 2,
        )

        def add_lost(tx: StoreTransaction) -> int:
            tx.insert_flow(replace(flow_row("lost"), flow_type=flow.flow_type, input='"x"'))
            return tx.insert_execution(lost)

        lost_id = await engine.run(add_lost)

        async def status() -> ExecutionStatus | None:
            row = await engine.read(lambda tx: tx.get_execution(lost_id))
            return None if row is None else row.status

        # Commits that wake the claim loop keep coming; each is looked at as a read,
        # and none may put off the full round that finds the lost lease.
        client = LocalFlowClient(engine)
        for n in range(100):
            if await status() is ExecutionStatus.READY:
                break
            await client.start_flow(flow, f"busy-{n}", "waits")
            await asyncio.sleep(0.05)
        assert await status() is ExecutionStatus.READY  # the same attempt, handed out again
        assert busy.store.capacity_rounds


async def test_a_worker_with_no_free_slot_does_not_spin_on_a_due_step_it_cannot_take(
    tmp_path: Path,
) -> None:
    async with _one_slot_held(tmp_path / "engine.sqlite3") as busy:
        engine, flow = busy.engine, busy.flow
        # A retry whose delay has passed: due now, and claimable once a slot frees.
        due = execution("due", "Work", input='"x"', not_before=engine.now())

        def add_due(tx: StoreTransaction) -> None:
            tx.insert_flow(replace(flow_row("due"), flow_type=flow.flow_type, input='"x"'))
            tx.insert_execution(due)

        rounds = busy.store.rounds
        await engine.run(add_due)
        await asyncio.sleep(0.5)
        # The round the insert woke found it and no slot; the next waits for a slot,
        # a commit or the cadence, not for a time that has passed.
        assert busy.store.rounds - rounds <= 2
        busy.release.set()
        while "Work-1" not in flow.probe.attempts:  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_a_client_commit_hands_what_it_made_runnable_to_the_worker_of_its_process(
    recorded: tuple[RecordingStore, LocalEngine],
) -> None:
    store, engine = recorded
    client = LocalFlowClient(engine)
    flow = engine.flow("SuspendingWait").flow
    async with running_worker(engine) as worker:
        # The worker becomes the target just before its claim loop runs its first round,
        # which a loaded machine may run only after the count below was read.
        while engine.hand_off_target is not worker or store.rounds == 0:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        rounds = store.rounds
        # The start commit leases Begin to the worker; the RPC's commit leases the
        # wait it satisfied. Neither waits for a claim round.
        await client.start_flow(flow, "s1", None)
        while await _flow_status(engine, "s1") is None:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        assert await client.invoke_rpc(flow, "s1", "send", "handed") is True
        while await _flow_status(engine, "s1") is not FlowStatus.COMPLETED:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    target: object = engine.hand_off_target  # read again: the loop above narrowed it
    assert target is None
    assert store.round_claims == []
    assert store.rounds == rounds


class HeldRound(RecordingStore):
    """A ``RecordingStore`` whose next claim round, once armed, waits on the store's thread
    until released: before its transaction begins, or after it committed (``after``)."""

    def __init__(self, inner: FlowStore, *, after: bool) -> None:
        super().__init__(inner)
        self.after = after
        self.armed = False
        self.arrived = threading.Event()
        self.release = threading.Event()

    def _around(
        self, works: Sequence[Callable[[StoreTransaction], Any]], run: Callable[[], T]
    ) -> T:
        held = self.armed and any(
            getattr(work, "func", None) is claims.claim_round for work in works
        )
        if held:
            self.armed = False
        if held and not self.after:
            self._wait()
        result = run()
        if held and self.after:
            self._wait()
        return result

    def _wait(self) -> None:
        self.arrived.set()
        self.release.wait(10)

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        return self._around([work], lambda: super(HeldRound, self).run(work, durable=durable))

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        return self._around(works, lambda: super(HeldRound, self).run_batch(works, durable=durable))


@pytest.mark.parametrize("after", [False, True], ids=["before-it-begins", "after-it-claimed"])
async def test_a_client_commit_takes_the_slots_a_claim_round_does_not_need(
    tmp_path: Path, after: bool
) -> None:
    # A claim round reserves every free slot until the claim loop resumes after its
    # commit; a user's message committed meanwhile found none, and its Step waited for
    # the next round.
    store = HeldRound(SqliteFlowStore(tmp_path / "engine.sqlite3"), after=after)
    engine = LocalEngine(store, [EngineTestFlow()], poll_interval=timedelta(seconds=30))
    store.armed = True
    worker = LocalWorker(engine, max_concurrent_tasks=HANDOFF_EXTRA_SLOTS + 1)
    running = asyncio.create_task(worker.run())
    offered: list[int] = []

    def work(tx: StoreTransaction, owner: str, limit: int) -> tuple[None, HandOff]:
        offered.append(limit)
        return None, HandOff(committed=True)

    try:
        # The worker's first claim round holds its free slots, and found nothing to claim.
        assert await asyncio.to_thread(store.arrived.wait, 10)
        handing = asyncio.create_task(worker.commit_handing_off(work))
        for _ in range(3):  # the hand-off reserves before its first await
            await asyncio.sleep(0)
        store.release.set()
        async with asyncio.timeout(10):
            await handing
    finally:
        store.release.set()
        await worker.stop()
        await running
        engine.close()
        store.close()
    assert offered == [HANDOFF_EXTRA_SLOTS]


async def test_an_rpc_that_changes_nothing_takes_no_write_transaction(
    recorded: tuple[RecordingStore, LocalEngine],
) -> None:
    store, engine = recorded
    client = LocalFlowClient(engine)
    flow = engine.flow("SuspendingWait").flow
    await client.start_flow(flow, "s1", None)
    writes = store.writes
    assert await client.invoke_rpc(flow, "s1", "peek", None) == 0
    assert await client.invoke_rpc(flow, "s1", "peek", None) == 0
    assert store.writes == writes
    # A writing RPC is tried as a read once, then run as a write, and its message is
    # stored once; from then on it goes straight to a write.
    reads = store.reads
    assert await client.invoke_rpc(flow, "s1", "send", "one") is True
    assert (store.reads - reads, store.writes - writes) == (1, 1)
    assert await client.invoke_rpc(flow, "s1", "send", "two") is True
    assert (store.reads - reads, store.writes - writes) == (1, 2)
    assert await client.invoke_rpc(flow, "s1", "peek", None) == 2


async def test_commits_that_queue_up_are_committed_together(
    recorded: tuple[RecordingStore, LocalEngine],
) -> None:
    store, engine = recorded
    held = threading.Event()

    def first(tx: StoreTransaction) -> str:
        # Holds the store thread until every other commit has queued behind it.
        assert held.wait(10)
        tx.put_value("f", "first", "", "1")
        return "first"

    def put(n: int, tx: StoreTransaction) -> int:
        tx.put_value("f", f"v{n}", "", str(n))
        return n

    def refused(tx: StoreTransaction) -> None:
        tx.put_value("f", "refused", "", "never")
        raise ValueError("refused alone")

    first_commit = asyncio.create_task(engine.run(first))
    await asyncio.sleep(0.05)
    others = [asyncio.create_task(engine.run(functools.partial(put, n))) for n in range(5)]
    failing = asyncio.create_task(engine.run(refused))
    await asyncio.sleep(0.05)
    held.set()
    assert await first_commit == "first"
    assert [await task for task in others] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="refused alone"):
        await failing
    assert store.batch_sizes == [6]

    def values(tx: StoreTransaction) -> tuple[str | None, ...]:
        names = ["first", *(f"v{n}" for n in range(5)), "refused"]
        return tuple(tx.get_value("f", name, "") for name in names)

    assert await engine.read(values) == ("1", "0", "1", "2", "3", "4", None)
