"""Behaviour of the embedded engine on small generic Flows, over each store."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local import claims, handoff, lease_recovery
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.history_retention import DEFAULT_STEP_HISTORY_LIMIT
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.round_slots import RoundSlots
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.errors import (
    FlowAlreadyStartedError,
    FlowDefinitionError,
    FlowNotActiveError,
    FlowNotFoundError,
    InvalidResumeTokenError,
    RpcLockConflictError,
    StreamReadTimeoutError,
)
from dex_agents.ports.flow_client import EXECUTE_COMPLETED_EVENT, STEP_CANCELLED_EVENT
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.step_contexts import AttemptProgress
from tests.adapters.engine_flows import EngineTestFlow, Probe
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE

STORES = ["memory", "sqlite"]


def make_store(kind: str, path: Path) -> FlowStore:
    if kind == "memory":
        return MemoryFlowStore()
    from dex_agents.adapters.local.sqlite_store import SqliteFlowStore

    return SqliteFlowStore(path / "engine.sqlite3")


@dataclass
class Stack:
    flow: EngineTestFlow
    engine: LocalEngine
    client: LocalFlowClient
    probe: Probe

    async def log(self, flow_id: str) -> tuple[str, ...]:
        result: tuple[str, ...] = await self.client.invoke_rpc(self.flow, flow_id, "read_log", None)
        return result


async def eventually(
    description: str, probe: Callable[[], Awaitable[bool]], seconds: float = 10
) -> None:
    """Poll ``probe`` until it holds, failing with ``description`` after ``seconds``."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not await probe():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {description}")
        await asyncio.sleep(0.01)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@contextlib.asynccontextmanager
async def running_stack(
    store: FlowStore,
    *,
    lease: timedelta = timedelta(seconds=10),
    worker: bool = True,
    step_history_limit: int | None = DEFAULT_STEP_HISTORY_LIMIT,
) -> AsyncIterator[Stack]:
    probe = Probe(release=asyncio.Event())
    flow = EngineTestFlow(probe)
    engine = LocalEngine(
        store,
        [flow],
        lease_duration=lease,
        poll_interval=timedelta(milliseconds=20),
        step_history_limit=step_history_limit,
        # A Step whose attempt failed (its lease lost) retries without the policy's 1 s.
        retry_interval_scale=RETRY_INTERVAL_SCALE,
    )
    client = LocalFlowClient(engine)
    task: asyncio.Task[None] | None = None
    local_worker = LocalWorker(engine, max_concurrent_tasks=8)
    if worker:
        task = asyncio.create_task(local_worker.run())
    try:
        yield Stack(flow, engine, client, probe)
    finally:
        await local_worker.stop()
        if task is not None:
            await task
        engine.close()
        store.close()


@pytest.fixture
async def stack(store_kind: str, tmp_path: Path) -> AsyncIterator[Stack]:
    async with running_stack(make_store(store_kind, tmp_path)) as running:
        yield running


async def test_an_rpc_lists_only_the_channels_it_loads(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", None)
    with pytest.raises(LookupError, match=r"Channel Inbox were not loaded.*channel_loads"):
        await stack.client.invoke_rpc(stack.flow, "s1", "pending_unloaded", None)


async def test_a_channel_wait_consumes_each_message_once_in_order(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "hello")
    for text in ("a", "b", "c"):
        assert await stack.client.invoke_rpc(stack.flow, "s1", "send", text) is True

    async def logged() -> bool:
        return len(await stack.log("s1")) == 4

    await eventually("three messages", logged)
    assert await stack.log("s1") == ("start:hello", "message:a", "message:b", "message:c")
    assert await stack.client.invoke_rpc(stack.flow, "s1", "pending", None) == ()


async def test_a_timer_fires_when_no_message_comes(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "timer")

    async def woke() -> bool:
        return "woke:timer" in await stack.log("s1")

    await eventually("the timer", woke)


async def test_a_message_wins_over_a_timer_that_has_not_fired(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "timer")
    await stack.client.invoke_rpc(stack.flow, "s1", "send", "early")

    async def woke() -> bool:
        return any(entry.startswith("woke:") for entry in await stack.log("s1"))

    await eventually("the wake-up", woke)
    assert "woke:message:early" in await stack.log("s1")


async def test_parallel_steps_are_joined_by_a_channel_count(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "fan-out")

    async def joined() -> bool:
        return any(entry.startswith("joined:") for entry in await stack.log("s1"))

    await eventually("the join", joined)
    assert "joined:w0,w1,w2" in await stack.log("s1")
    results = await stack.client.invoke_rpc(stack.flow, "s1", "read_results", None)
    assert sorted(results) == ["w0", "w1", "w2"]
    history = await stack.client.read_step_history("s1")
    assert sorted(e.step_type for e in history) == ["Join", "Start", "Work", "Work", "Work"]
    assert {e.event_type for e in history} == {EXECUTE_COMPLETED_EVENT}


async def test_a_failed_attempt_retries_with_its_checkpoint(stack: Stack) -> None:
    stack.probe.fail_first["flaky"] = 2
    await stack.client.start_flow(stack.flow, "s1", "flaky")

    async def done() -> bool:
        return "flaky-ok:3" in await stack.log("s1")

    await eventually("the third attempt", done)
    assert stack.probe.attempts["Flaky-1"] == [1, 2, 3]
    # Each retry reads the checkpoint its predecessor saved.
    assert stack.probe.checkpoints == [None, "checkpoint-1", "checkpoint-2"]
    history = await stack.client.read_step_history("s1")
    flaky = [entry for entry in history if entry.step_type == "Flaky"]
    assert [(entry.final_attempt, entry.event_type) for entry in flaky] == [
        (3, EXECUTE_COMPLETED_EVENT)
    ]


async def test_a_steps_own_options_are_read_once_when_its_flow_type_registers(
    stack: Stack,
) -> None:
    # Static options: the ones the registry checked are the ones every claim, wait and
    # commit of every attempt runs by.
    assert stack.probe.options_reads == 1
    stack.probe.fail_first["flaky"] = 2
    await stack.client.start_flow(stack.flow, "s1", "flaky")

    async def done() -> bool:
        return "flaky-ok:3" in await stack.log("s1")

    await eventually("the third attempt", done)
    assert stack.probe.options_reads == 1


async def test_spent_retries_take_the_failure_route_with_the_recovery_error(stack: Stack) -> None:
    stack.probe.fail_first["flaky"] = 5
    await stack.client.start_flow(stack.flow, "s1", "flaky")

    async def recovered() -> bool:
        return any(entry.startswith("recovered:") for entry in await stack.log("s1"))

    await eventually("the failure route", recovered)
    assert "recovered:flaky:not_completed" in await stack.log("s1")
    (error,) = stack.probe.recovery
    assert error.error_type == "RuntimeError"
    assert error.detail == "attempt 3 fails on purpose"
    assert error.attempt_progress is AttemptProgress.NOT_COMPLETED
    assert stack.probe.attempts["Flaky-1"] == [1, 2, 3]


async def test_an_rpc_conflicts_with_a_lock_a_running_step_holds(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "locked")

    async def holding() -> bool:
        return "HoldLock-1" in stack.probe.attempts

    await eventually("the lock holder", holding)
    with pytest.raises(RpcLockConflictError, match="holds Guarded"):
        await stack.client.invoke_rpc(stack.flow, "s1", "guarded_write", "by rpc")
    assert stack.probe.release is not None
    stack.probe.release.set()

    async def released() -> bool:
        try:
            return bool(await stack.client.invoke_rpc(stack.flow, "s1", "guarded_write", "rpc"))
        except RpcLockConflictError:
            return False

    await eventually("the lock release", released)


async def test_an_rpc_cancels_a_running_step_which_sees_cancelled_error(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "long")

    async def running() -> bool:
        return "Long-1" in stack.probe.attempts

    await eventually("the long step", running)
    assert await stack.client.invoke_rpc(stack.flow, "s1", "cancel_long", None) is True

    async def after() -> bool:
        return "after-cancel" in await stack.log("s1")

    await eventually("the step the RPC started", after)

    async def cancelled() -> bool:
        return stack.probe.cancelled == ["Long-1"]

    await eventually("the cancellation inside the step", cancelled)
    history = await stack.client.read_step_history("s1")

    async def recorded() -> bool:
        entries = await stack.client.read_step_history("s1")
        return any(e.step_type == "Long" and e.event_type == STEP_CANCELLED_EVENT for e in entries)

    await eventually("the cancelled history entry", recorded)
    assert "long-finished" not in await stack.log("s1")
    assert history


async def test_stream_events_resume_without_repeats_and_refuse_bad_tokens(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "x")
    await stack.client.start_flow(stack.flow, "s2", "y")
    for text in ("a", "b"):
        await stack.client.invoke_rpc(stack.flow, "s1", "send", text)
    seen: list[str] = []
    token = ""
    for _ in range(3):
        message = await stack.client.read_stream(
            stack.flow, "s1", token, poll_timeout=timedelta(seconds=10)
        )
        seen.append(message.value)
        token = message.resume_token
        assert message.source.startswith("#")
    assert seen == ["started x", "got a", "got b"]
    with pytest.raises(StreamReadTimeoutError):
        await stack.client.read_stream(
            stack.flow, "s1", token, poll_timeout=timedelta(milliseconds=50)
        )
    with pytest.raises(InvalidResumeTokenError, match="another session"):
        await stack.client.read_stream(stack.flow, "s2", token)
    with pytest.raises(InvalidResumeTokenError, match="malformed"):
        await stack.client.read_stream(stack.flow, "s1", "not a token!")


async def test_reading_the_stream_of_an_unknown_session_is_refused(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "x")
    with pytest.raises(FlowNotFoundError, match="no session with ID 'nope'"):
        await stack.client.read_stream(stack.flow, "nope", "", poll_timeout=timedelta(seconds=1))


async def test_a_stream_read_that_finds_events_does_not_look_the_session_up(
    tmp_path: Path,
) -> None:
    from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
    from tests.adapters.traced_sql import traced_statements

    async with running_stack(SqliteFlowStore(tmp_path / "engine.sqlite3")) as writer:
        await writer.client.start_flow(writer.flow, "s1", "x")
        await writer.client.invoke_rpc(writer.flow, "s1", "send", "a")
        # Another connection reads, as a client in another process: no kept row, no own event.
        reader_store = SqliteFlowStore(tmp_path / "engine.sqlite3")
        async with running_stack(reader_store, worker=False) as reader:
            with traced_statements(reader_store) as statements:
                first = await reader.client.read_stream(reader.flow, "s1", "")
            assert first.value == "started x"
            assert not [sql for sql in statements if "FROM flows" in sql]


async def test_a_long_poll_wakes_for_a_new_event(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "x")
    first = await stack.client.read_stream(stack.flow, "s1", "", poll_timeout=timedelta(seconds=5))
    reader = asyncio.create_task(
        stack.client.read_stream(
            stack.flow, "s1", first.resume_token, poll_timeout=timedelta(seconds=10)
        )
    )
    await asyncio.sleep(0.05)
    await stack.client.invoke_rpc(stack.flow, "s1", "send", "late")
    assert (await reader).value == "got late"


async def test_client_errors_are_clear(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "x")
    with pytest.raises(FlowAlreadyStartedError, match="'s1'"):
        await stack.client.start_flow(stack.flow, "s1", "x")
    with pytest.raises(FlowNotFoundError, match="'nope'"):
        await stack.client.invoke_rpc(stack.flow, "nope", "read_log", None)
    with pytest.raises(FlowDefinitionError, match="no RPC missing"):
        await stack.client.invoke_rpc(stack.flow, "s1", "missing", None)
    with pytest.raises(ValueError, match="contain no '/'"):
        await stack.client.start_flow(stack.flow, "a/b", "x")


async def test_a_stopped_flow_serves_reads_but_refuses_writes(stack: Stack) -> None:
    await stack.client.start_flow(stack.flow, "s1", "x")

    async def started() -> bool:
        return await stack.log("s1") == ("start:x",)

    await eventually("the start", started)
    await stack.client.stop_flow("s1")
    assert await stack.log("s1") == ("start:x",)
    with pytest.raises(FlowNotActiveError):
        await stack.client.invoke_rpc(stack.flow, "s1", "send", "late")
    info = await stack.client.describe_flow("s1")
    assert info.status == "stopped"
    assert info.active_step_types == ()


async def test_a_transactional_rpc_deletes_a_waiting_message(
    store_kind: str, tmp_path: Path
) -> None:
    async with running_stack(make_store(store_kind, tmp_path), worker=False) as stack:
        await stack.client.start_flow(stack.flow, "s1", "x")
        await stack.client.invoke_rpc(stack.flow, "s1", "send", "a")
        await stack.client.invoke_rpc(stack.flow, "s1", "send", "b")
        assert await stack.client.invoke_rpc(stack.flow, "s1", "delete_first", None) is True
        assert await stack.client.invoke_rpc(stack.flow, "s1", "pending", None) == ("b",)
        info = await stack.client.describe_flow("s1")
        assert info.active_step_types == ("Start",)


async def _ghost_claims_start(stack: Stack) -> Any:
    """A worker that claims the start Step and then dies, never renewing its lease."""
    engine = stack.engine
    claimed = await engine.run(
        lambda tx: claims.claim(tx, engine.flows, "ghost", engine.now(), engine.lease_duration, 1)
    )
    assert [claim.row.step_execution_id for claim in claimed] == ["Start-1"]
    return claimed[0]


async def _run_worker_until(stack: Stack, entry: str) -> None:
    worker = LocalWorker(stack.engine)
    task = asyncio.create_task(worker.run())

    async def logged() -> bool:
        return entry in await stack.log("s1")

    await eventually(entry, logged)
    await worker.stop()
    await task


async def test_a_lost_lease_before_the_step_started_runs_the_same_attempt(
    store_kind: str, tmp_path: Path
) -> None:
    async with running_stack(
        make_store(store_kind, tmp_path), lease=timedelta(milliseconds=300), worker=False
    ) as stack:
        await stack.client.start_flow(stack.flow, "s1", "flaky")
        await _ghost_claims_start(stack)
        await asyncio.sleep(0.4)
        await _run_worker_until(stack, "flaky-ok:1")
        assert stack.probe.attempts["Start-1"] == [1]
        history = await stack.client.read_step_history("s1")
        assert (history[0].step_execution_id, history[0].final_attempt) == ("Start-1", 1)


async def test_a_round_recovers_the_leases_of_gone_owners_only(
    store_kind: str, tmp_path: Path
) -> None:
    async with running_stack(make_store(store_kind, tmp_path), worker=False) as stack:
        await stack.client.start_flow(stack.flow, "s1", "x")
        await _ghost_claims_start(stack)
        engine = stack.engine

        async def round_(gone: Callable[[str], bool]) -> claims.ClaimRound:
            work = functools.partial(
                claims.claim_round,
                flows=engine.flows,
                owner="me",
                clock=engine.now,
                lease=engine.lease_duration,
                slots=RoundSlots(1),
                run_claimed=handoff.run_claimed,
                gone=gone,
            )
            return await engine.run(work)

        looked: list[str] = []

        def alive_owner(owner: str) -> bool:
            looked.append(owner)
            return False

        alive = await round_(alive_owner)
        assert looked == ["ghost"]  # never "me": a worker does not look at its own mark
        assert (alive.claims, alive.gone_owners) == ([], frozenset())
        gone = await round_(lambda owner: owner == "ghost")
        # The ghost never reached the Step's code: its attempt runs again, as a lapsed
        # lease's would, and this round took it.
        assert [(c.row.step_execution_id, c.row.attempt) for c in gone.claims] == [("Start-1", 1)]
        assert gone.claims[0].row.lease_owner == "me"
        assert gone.gone_owners == {"ghost"}


async def test_a_lost_lease_after_the_step_started_fails_the_attempt(
    store_kind: str, tmp_path: Path
) -> None:
    async with running_stack(
        make_store(store_kind, tmp_path), lease=timedelta(milliseconds=300), worker=False
    ) as stack:
        await stack.client.start_flow(stack.flow, "s1", "flaky")
        claim = await _ghost_claims_start(stack)
        engine = stack.engine
        flow = engine.registered(stack.flow)
        # The ghost reached the Step's code: its heartbeat marks the attempt started.
        assert await engine.run(
            lambda tx: claims.record_heartbeat(
                tx, flow, claim.row, "ghost", False, [], engine.now()
            )
        )
        await asyncio.sleep(0.4)
        await _run_worker_until(stack, "flaky-ok:1")
        assert stack.probe.attempts["Start-1"] == [2]
        history = await stack.client.read_step_history("s1")
        assert (history[0].step_execution_id, history[0].final_attempt) == ("Start-1", 2)
        # The ghost's late heartbeat is refused: it no longer holds the lease.
        assert not await engine.run(
            lambda tx: claims.record_heartbeat(tx, flow, claim.row, None, True, [], engine.now())
        )


def test_flow_definitions_are_checked_when_registered() -> None:
    flow = EngineTestFlow()
    with pytest.raises(FlowDefinitionError, match="registered twice"):
        LocalEngine(MemoryFlowStore(), [flow, EngineTestFlow()])


async def test_live_events_of_a_failed_attempt_stay_on_the_stream(stack: Stack) -> None:
    stack.probe.fail_first["flaky"] = 1
    stack.probe.events_before_failing = True
    await stack.client.start_flow(stack.flow, "s1", "flaky")

    async def done() -> bool:
        return "flaky-ok:2" in await stack.log("s1")

    await eventually("the second attempt", done)
    seen: list[str] = []
    token = ""
    while True:
        try:
            message = await stack.client.read_stream(
                stack.flow, "s1", token, poll_timeout=timedelta(milliseconds=50)
            )
        except StreamReadTimeoutError:
            break
        seen.append(message.value)
        token = message.resume_token
    assert "attempt 1 is about to fail" in seen


async def test_a_stopping_worker_hands_back_work_it_never_started(
    store_kind: str, tmp_path: Path
) -> None:
    async with running_stack(
        make_store(store_kind, tmp_path), lease=timedelta(seconds=60), worker=False
    ) as stack:
        await stack.client.start_flow(stack.flow, "s1", "flaky")
        await _ghost_claims_start(stack)
        engine = stack.engine
        released = await engine.run(
            lambda tx: lease_recovery.release_unstarted(tx, engine.flows, "ghost", engine.now())
        )
        assert released == lease_recovery.HandBack(released=1, kept=0)
        # With a 60 s lease, only the hand-back lets a new worker run it now.
        await _run_worker_until(stack, "flaky-ok:1")
        assert stack.probe.attempts["Start-1"] == [1]


async def test_a_reader_s_wait_that_runs_out_returns_and_leaves_no_cancellation(
    store_kind: str, tmp_path: Path
) -> None:
    async with running_stack(make_store(store_kind, tmp_path), worker=False) as stack:
        await stack.client.start_flow(stack.flow, "s1", "x")
        engine = stack.engine
        mark = await engine.flow_change_mark()

        async def read() -> int:
            now = await engine.wait_for_flow_change("s1", mark, timedelta(milliseconds=20))
            await asyncio.sleep(0)  # no cancellation is left to come after the wait
            return now

        waiter = asyncio.create_task(read())
        assert await waiter >= mark
        assert waiter.cancelling() == 0
        assert not engine._flow_changes.watched()  # the run's watch ended with the wait


async def test_a_reader_cancelled_as_it_is_woken_stays_cancelled(
    store_kind: str, tmp_path: Path
) -> None:
    # A reader stopped (cancelled) in the same instant a look wakes it must end: Python
    # 3.11's asyncio.wait_for returned the wake-up instead, and such a reader read on forever.
    async with running_stack(make_store(store_kind, tmp_path), worker=False) as stack:
        await stack.client.start_flow(stack.flow, "s1", "x")
        engine = stack.engine
        mark = await engine.flow_change_mark()
        waiter = asyncio.create_task(engine.wait_for_flow_change("s1", mark, timedelta(seconds=10)))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        engine._flow_changes.wake_all()  # the wake-up and the cancellation in one loop step
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
