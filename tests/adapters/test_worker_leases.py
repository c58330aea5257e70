"""A worker keeps its running attempts' leases and stops the started ones that went silent
(``worker_leases.py``); an attempt whose lease another worker took stops at its next
heartbeat, its own task's or one another task sends for it, or at its next live-event flush.

The engine's clock here is a test's own, which stands still unless the test moves it:
an attempt goes silent past its heartbeat timeout, or its lease lapses, when the test
says so, not after a real wait, while the worker's renewals keep their real cadence (a
third of a lease).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from dex_agents.adapters.local import claims
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.step_context import LeaseLostError
from dex_agents.ports.engine import RetryPolicy, Rpc, Step, StepDecision, StepOptions, dead_end
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.step_contexts import RecoveryError, StepContext
from tests.adapters.engine_flows import EVENTS, running_worker

HEARTBEAT_TIMEOUT = timedelta(seconds=1)
# Renewed every second; long enough that the clock's move below leaves it held.
LEASE = timedelta(seconds=3)
# Renewed every 20 s: not within a test.
LONG_LEASE = timedelta(minutes=1)


class Clock:
    """The engine's clock, far from the machine's, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2000, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class Silent(Step[None]):
    """Heartbeats once, then waits for an event the test never sets; notes its cancellation."""

    def __init__(self) -> None:
        self.beat = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.cancellation_requested: bool | None = None

    def options(self) -> StepOptions:
        return StepOptions(
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry=RetryPolicy(maximum_attempts=1),
            failure_step=Recovered,
        )

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        await context.heartbeat()
        self.beat.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancellation_requested = context.is_cancellation_requested()
            self.cancelled.set()
            raise
        return dead_end()


class Recovered(Step[None]):
    """The failure route: notes the recovery error."""

    def __init__(self) -> None:
        self.ran = asyncio.Event()
        self.error: RecoveryError | None = None

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.error = context.recovery_error
        self.ran.set()
        return dead_end()


class Gated(Step[None]):
    """Waits at a gate before its heartbeat, then has an effect outside the store, as a
    tool Step's heartbeat comes before its tool's call; notes each run and how it ended."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.reached_again = asyncio.Event()
        self.release = asyncio.Event()
        self.stopped = asyncio.Event()
        self.effected = asyncio.Event()
        self.runs: list[int] = []
        self.effects: list[int] = []
        self.cancellation_requested: bool | None = None

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.runs.append(context.attempt)
        (self.reached_again if self.reached.is_set() else self.reached).set()
        try:
            await self.release.wait()
            await context.heartbeat()
        except asyncio.CancelledError:
            self.cancellation_requested = context.is_cancellation_requested()
            self.stopped.set()
            raise
        self.effects.append(context.attempt)
        self.effected.set()
        return dead_end()


class BackgroundBeat(Step[None]):
    """Awaits a long call while another task heartbeats for it, as the session's background
    heartbeat does during a model or tool call; notes how the call and the beat ended."""

    def __init__(self) -> None:
        self.calling = asyncio.Event()
        self.beat_now = asyncio.Event()
        self.call_stopped = asyncio.Event()
        self.beat_error: BaseException | None = None
        self.cancellation_requested: bool | None = None
        self.results: list[int] = []

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        async def beat() -> None:
            await self.beat_now.wait()
            try:
                await context.heartbeat()
            except BaseException as error:
                self.beat_error = error
                raise

        beating = asyncio.create_task(beat())
        self.calling.set()
        try:
            await asyncio.Event().wait()  # the long call, which only a cancellation ends
        except asyncio.CancelledError:
            self.cancellation_requested = context.is_cancellation_requested()
            self.call_stopped.set()
            raise
        finally:
            beating.cancel()
        self.results.append(context.attempt)
        return dead_end()


class BackgroundBeatFlow:
    flow_type = "BackgroundBeat"
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.step = BackgroundBeat()
        self.start_step: Step[Any] = self.step
        self.steps: Sequence[Step[Any]] = (self.step,)


STREAM: StreamDef[str] = StreamDef("events", str, 1_000_000)


class Streaming(Step[None]):
    """Writes a live event when the test says so, then awaits a long call, as a model call
    streams its text; notes how the call ended."""

    def __init__(self) -> None:
        self.calling = asyncio.Event()
        self.write_now = asyncio.Event()
        self.call_stopped = asyncio.Event()
        self.cancellation_requested: bool | None = None
        self.results: list[int] = []

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.calling.set()
        await self.write_now.wait()
        context.write_event(STREAM, "a text delta")
        try:
            await asyncio.Event().wait()  # the rest of the call, which only a cancellation ends
        except asyncio.CancelledError:
            self.cancellation_requested = context.is_cancellation_requested()
            self.call_stopped.set()
            raise
        self.results.append(context.attempt)
        return dead_end()


class StreamingFlow:
    flow_type = "Streaming"
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = STREAM
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.step = Streaming()
        self.start_step: Step[Any] = self.step
        self.steps: Sequence[Step[Any]] = (self.step,)


class GatedFlow:
    flow_type = "Gated"
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.gated = Gated()
        self.start_step: Step[Any] = self.gated
        self.steps: Sequence[Step[Any]] = (self.gated,)


class SilentFlow:
    flow_type = "Silent"
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.silent, self.recovered = Silent(), Recovered()
        self.start_step: Step[Any] = self.silent
        self.steps: Sequence[Step[Any]] = (self.silent, self.recovered)


@contextlib.contextmanager
def _engine(flow: Any, clock: Clock, lease: timedelta) -> Iterator[LocalEngine]:
    """An engine on a memory store with ``lease`` and the test's ``clock``, closed after."""
    store = MemoryFlowStore()
    engine = LocalEngine(store, [flow], lease_duration=lease, clock=clock)
    try:
        yield engine
    finally:
        engine.close()
        store.close()


async def _another_worker_takes_over(
    engine: LocalEngine, clock: Clock, slots: int = 1
) -> list[claims.Claim]:
    """What a round of worker ``other`` claims once this worker's leases lapsed (it stalled)."""
    later = clock.now + 2 * LONG_LEASE
    return list(
        await engine.run(
            lambda tx: claims.claim(tx, engine.flows, "other", later, LONG_LEASE, slots)
        )
    )


async def test_a_started_attempt_silent_past_its_heartbeat_timeout_fails_as_requested() -> None:
    flow, clock = SilentFlow(), Clock()
    with _engine(flow, clock, LEASE) as engine:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", None)
            await flow.silent.beat.wait()
            # Silent for longer than its timeout by the engine's clock, and still leased.
            clock.now += 2 * HEARTBEAT_TIMEOUT
            await flow.recovered.ran.wait()
        # The engine stopped it, as Dex does: a cancellation it asked for (so its spans are
        # kept), and a failed attempt whose retries are spent, not a Worker closing.
        assert flow.silent.cancelled.is_set()
        assert flow.silent.cancellation_requested is True
        error = flow.recovered.error
        assert error is not None
        assert (error.error_type, error.detail) == (
            "HeartbeatTimeoutError",
            "no heartbeat for 0:00:01",
        )


async def test_an_attempt_whose_lease_another_worker_took_stops_at_its_heartbeat() -> None:
    flow, clock = GatedFlow(), Clock()
    with _engine(flow, clock, LONG_LEASE) as engine:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", None)
            await flow.gated.reached.wait()
            # This worker stalled past its lease, and another worker's round took the
            # attempt over: it had not started, so as the same attempt.
            taken = await _another_worker_takes_over(engine, clock)
            assert [(c.row.step_execution_id, c.row.attempt) for c in taken] == [("Gated-1", 1)]
            flow.gated.release.set()
            await flow.gated.stopped.wait()
        assert flow.gated.runs == [1]
        # The stalled attempt's heartbeat could not be recorded: it stopped there, and its
        # effect did not run beside the other worker's, nor did it ask for a cancellation.
        assert flow.gated.effects == []
        assert flow.gated.cancellation_requested is False
        (row,) = await engine.read(lambda tx: tx.flow_executions("f1"))
        assert (row.status, row.lease_owner, row.attempt) == (ExecutionStatus.RUNNING, "other", 1)


async def test_an_attempt_handed_out_again_to_its_own_worker_runs_once() -> None:
    flow, clock = GatedFlow(), Clock()
    with _engine(flow, clock, LONG_LEASE) as engine:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", None)
            await flow.gated.reached.wait()
            # This worker stalled past its lease; another worker with no free slot recovered
            # the lease (the attempt had not started: the same attempt is runnable again)
            # and this worker's next round claims it.
            await _another_worker_takes_over(engine, clock, slots=0)
            await flow.gated.reached_again.wait()
            # The old run lost its lease to the new one: it stopped without asking for a
            # cancellation, and only the new one goes on to the effect.
            await flow.gated.stopped.wait()
            assert flow.gated.cancellation_requested is False
            flow.gated.release.set()
            await flow.gated.effected.wait()
        assert flow.gated.runs == [1, 1]
        assert flow.gated.effects == [1]


async def test_a_lease_lost_found_by_another_tasks_heartbeat_stops_the_attempt() -> None:
    flow, clock = BackgroundBeatFlow(), Clock()
    with _engine(flow, clock, LONG_LEASE) as engine:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", None)
            await flow.step.calling.wait()
            # This worker stalled past its lease and another worker took the attempt over;
            # then the background heartbeat, not the Step's own task, finds it out.
            await _another_worker_takes_over(engine, clock)
            flow.step.beat_now.set()
            # The long call stops there (before, it ran on to a result its commit dropped,
            # a model call paid twice), as a cancellation nobody asked for.
            await flow.step.call_stopped.wait()
        assert isinstance(flow.step.beat_error, LeaseLostError)
        assert flow.step.cancellation_requested is False
        assert flow.step.results == []
        (row,) = await engine.read(lambda tx: tx.flow_executions("f1"))
        assert (row.status, row.lease_owner, row.attempt) == (ExecutionStatus.RUNNING, "other", 1)


async def test_a_lease_lost_found_by_a_live_event_flush_stops_the_attempt() -> None:
    flow, clock = StreamingFlow(), Clock()
    with _engine(flow, clock, LONG_LEASE) as engine:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", None)
            await flow.step.calling.wait()
            # This worker stalled past its lease and another worker took the attempt over;
            # then the flush of a streamed text delta, not a heartbeat, finds it out.
            await _another_worker_takes_over(engine, clock)
            flow.step.write_now.set()
            # The call stops at that flush (before, it ran on until its next heartbeat, up
            # to 20 s, paid for a result its commit dropped), as a cancellation nobody asked for.
            await flow.step.call_stopped.wait()
        assert flow.step.cancellation_requested is False
        assert flow.step.results == []
        # The flush wrote nothing for the attempt that no longer holds the lease.
        assert await engine.read(lambda tx: list(tx.events_after("f1", 0, 10))) == []
        (row,) = await engine.read(lambda tx: tx.flow_executions("f1"))
        assert (row.status, row.lease_owner, row.attempt) == (ExecutionStatus.RUNNING, "other", 1)
        assert not row.attempt_started


async def test_a_live_event_flush_of_a_flow_with_no_stream_says_whether_the_lease_holds() -> None:
    # A flush that writes nothing because the Flow has no Stream is not a lease lost: the
    # worker stops the attempt only on the second.
    flow, clock = GatedFlow(), Clock()
    with _engine(flow, clock, LONG_LEASE) as engine:
        registered = engine.registered(flow)
        await LocalFlowClient(engine).start_flow(flow, "f1", None)
        (mine,) = await engine.run(
            lambda tx: claims.claim(tx, engine.flows, "me", clock.now, LONG_LEASE, 1)
        )
        assert await engine.run(
            lambda tx: claims.append_events(tx, registered, mine.row, ["x"], clock.now)
        )
        (row,) = await engine.read(lambda tx: tx.flow_executions("f1"))
        assert not row.attempt_started  # nothing was written: the Step's code may not have run
        later = clock.now + 2 * LONG_LEASE
        await engine.run(lambda tx: claims.claim(tx, engine.flows, "other", later, LONG_LEASE, 1))
        assert not await engine.run(
            lambda tx: claims.append_events(tx, registered, mine.row, ["x"], later)
        )
        assert await engine.read(lambda tx: list(tx.events_after("f1", 0, 10))) == []


class EventBeat(Step[None]):
    """Writes a live event, waits at a gate, then heartbeats: the heartbeat carries the event."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.stopped = asyncio.Event()
        self.error: BaseException | None = None

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        context.write_event(EVENTS, "progress")
        self.reached.set()
        try:
            await self.release.wait()
            await context.heartbeat()
        except asyncio.CancelledError as error:
            self.error = error
            self.stopped.set()
            raise
        return dead_end()


class EventBeatFlow:
    flow_type = "EventBeat"
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = EVENTS
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.step = EventBeat()
        self.start_step: Step[Any] = self.step
        self.steps: Sequence[Step[Any]] = (self.step,)


async def test_a_lease_lost_found_by_the_attempts_own_heartbeat_with_events_raises_there() -> None:
    flow, clock = EventBeatFlow(), Clock()
    with _engine(flow, clock, LONG_LEASE) as engine:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", None)
            await flow.step.reached.wait()
            await _another_worker_takes_over(engine, clock)
            flow.step.release.set()
            await flow.step.stopped.wait()
        # Its commit carrying the event runs in the attempt's own task, so the lease lost
        # is raised there, not a cancellation from another task.
        assert isinstance(flow.step.error, LeaseLostError)
