"""Small generic Flows that exercise the embedded engine (not the agent session).

Each Step records what it did in Attributes, so tests read outcomes through RPCs.
Steps that must be observed from outside a process record their real invocations
in ``<state_dir>/invocations.log`` (see ``Probe``) and can stop at a file gate, so
crash tests can SIGKILL a worker process at an exact point.

The start input picks the branch: ``"fan-out"``, ``"timer"``, ``"flaky"``,
``"locked"``, ``"gated-lock"``, ``"long"``, ``"gate"``, ``"early-gate"``, ``"timer:<seconds>"``,
``"fan-out:<n>"`` and ``"gated-fan-out:<n>"``; anything else waits for messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.engine import (
    AttributeLock,
    FlowDefinition,
    MapLoad,
    RetryPolicy,
    Rpc,
    RpcResult,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    complete,
    dead_end,
    go_to,
    go_to_many,
)
from dex_agents.ports.flow_rows import FlowStatus
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    StreamDef,
)
from dex_agents.ports.step_contexts import RpcContext, StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Wait, timer
from tests.support.flow_runs import wait_for_status

LOG: AttributeDef[tuple[str, ...]] = AttributeDef("Log", tuple[str, ...])
RESULTS: AttributeMapDef[str] = AttributeMapDef("Results", str)
INBOX: ChannelDef[str] = ChannelDef("Inbox", str)
DONE: ChannelDef[str] = ChannelDef("Done", str)
GUARDED: AttributeDef[str] = AttributeDef("Guarded", str)
EVENTS: StreamDef[str] = StreamDef("Events", str, 1024 * 1024)


def append_log(context: StepContext | RpcContext, entry: str) -> None:
    """Append one entry to the ``Log`` Attribute."""
    log = context.state.get(LOG) or ()
    context.state.set(LOG, (*log, entry))


@dataclass
class Probe:
    """What Steps of one process report to the test that runs them (in-process tests only)."""

    attempts: dict[str, list[int]] = field(default_factory=dict)
    fail_first: dict[str, int] = field(default_factory=dict)
    release: asyncio.Event | None = None
    cancelled: list[str] = field(default_factory=list)
    checkpoints: list[str | None] = field(default_factory=list)
    recovery: list[Any] = field(default_factory=list)
    events_before_failing: bool = False
    state_dir: Path | None = None
    options_reads: int = 0
    """How many times ``Flaky.options`` was called."""

    def record(self, context: StepContext) -> int:
        attempts = self.attempts.setdefault(context.step_execution_id, [])
        attempts.append(context.attempt)
        if self.state_dir is not None:
            with (self.state_dir / "invocations.log").open("a", encoding="utf-8") as log:
                log.write(f"{os.getpid()} {context.step_execution_id} {context.attempt}\n")
        return len(attempts)


class Start(Step[str]):
    """Logs the start input, then waits for messages."""

    input_type = str

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        self.probe.record(context)
        append_log(context, f"start:{input}")
        context.state.write_event(EVENTS, f"started {input}")
        if input == "fan-out":
            return go_to_many(
                *(StepMovement(Work, f"w{i}") for i in range(3)),
                StepMovement(Join, 3),
            )
        if input == "timer":
            return go_to(Sleep, 0.3)
        if input == "flaky":
            return go_to(Flaky, "flaky")
        if input == "locked":
            return go_to(HoldLock, None)
        if input == "gated-lock":
            return go_to(GatedLock, None)
        if input == "long":
            return go_to(Long, None)
        if input == "gate":
            return go_to(Gated, None)
        if input == "early-gate":
            return go_to(EarlyGated, None)
        if input.startswith("timer:"):
            return go_to(Sleep, float(input.removeprefix("timer:")))
        if input.startswith("fan-out:"):
            return _fan_out(Work, int(input.removeprefix("fan-out:")))
        if input.startswith("gated-fan-out:"):
            return _fan_out(GatedWork, int(input.removeprefix("gated-fan-out:")))
        return go_to(AwaitMessage, None)


def _fan_out(step: type[Step[str]], count: int) -> StepDecision:
    """``count`` parallel ``step`` executions (inputs ``w0``, ``w1``, ...) and their Join."""
    return go_to_many(
        *(StepMovement(step, f"w{i}") for i in range(count)),
        StepMovement(Join, count),
    )


async def wait_for_file(path: Path) -> None:
    """Poll for a file gate's release file every 20 ms.

    Another process creates it, so no Event could tell; a stat is too quick to need a thread.
    """
    while not path.exists():  # noqa: ASYNC110, ASYNC240
        await asyncio.sleep(0.02)


class AwaitMessage(Step[None]):
    """Waits for one Inbox message, logs it, and waits again; ``stop`` ends the branch."""

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        return Wait.until(ChannelCondition(INBOX))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        (message,) = context.wait_result.messages
        append_log(context, f"message:{message}")
        context.write_event(EVENTS, f"got {message}")
        if message == "stop":
            return dead_end()
        return go_to(AwaitMessage, None)


class Sleep(Step[float]):
    """Waits on a Timer, or on an Inbox message if one comes first."""

    input_type = float

    async def wait_for(self, context: WaitContext, input: float) -> Wait:
        return Wait.any_of(ChannelCondition(INBOX), timer(timedelta(seconds=input)))

    async def execute(self, context: StepContext, input: float) -> StepDecision:
        result = context.wait_result
        what = "timer" if result.timer_fired else f"message:{result.messages[0]}"
        append_log(context, f"woke:{what}")
        return dead_end()


class Work(Step[str]):
    """One of several parallel Steps; publishes to Done. At a gate it waits for the test."""

    input_type = str

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        self.probe.record(context)
        context.state.set_instance(RESULTS, input, f"done by {context.step_execution_id}")
        context.state.publish(DONE, input)
        return dead_end()


class Join(Step[int]):
    """Waits for ``n`` Done messages, then logs them."""

    input_type = int

    async def wait_for(self, context: WaitContext, input: int) -> Wait:
        return Wait.until(ChannelCondition(DONE, input))

    async def execute(self, context: StepContext, input: int) -> StepDecision:
        append_log(context, "joined:" + ",".join(sorted(context.wait_result.messages)))
        return dead_end()


class Recover(Step[str]):
    """The failure route of ``Flaky``: logs what the recovery error says."""

    input_type = str

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        error = context.recovery_error
        self.probe.recovery.append(error)
        progress = "none" if error is None else error.attempt_progress.value
        append_log(context, f"recovered:{input}:{progress}")
        return dead_end()


class Flaky(Step[str]):
    """Fails its first ``probe.fail_first[input]`` attempts, saving a checkpoint each time."""

    input_type = str

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def options(self) -> StepOptions:
        self.probe.options_reads += 1
        return StepOptions(
            retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=10)),
            failure_step=Recover,
        )

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        self.probe.record(context)
        self.probe.checkpoints.append(context.last_heartbeat_value)
        await context.heartbeat(f"checkpoint-{context.attempt}")
        if context.attempt <= self.probe.fail_first.get(input, 0):
            if self.probe.events_before_failing:
                context.write_event(EVENTS, f"attempt {context.attempt} is about to fail")
            raise RuntimeError(f"attempt {context.attempt} fails on purpose")
        append_log(context, f"flaky-ok:{context.attempt}")
        return dead_end()


class HoldLock(Step[None]):
    """Holds the ``Guarded`` lock until the probe releases it."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def options(self) -> StepOptions:
        return StepOptions(locks=(AttributeLock(GUARDED),))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.probe.record(context)
        await context.heartbeat()
        assert self.probe.release is not None
        await self.probe.release.wait()
        context.state.set(GUARDED, "by step")
        return dead_end()


class GatedLock(Step[None]):
    """Holds the ``Guarded`` lock at a file gate (``lock.reached``, ``lock.release``), so a
    crash test can kill its worker while it holds the lock."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def options(self) -> StepOptions:
        return StepOptions(locks=(AttributeLock(GUARDED),))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.probe.record(context)
        await context.heartbeat()
        assert self.probe.state_dir is not None
        (self.probe.state_dir / "lock.reached").write_text(str(context.attempt))
        await wait_for_file(self.probe.state_dir / "lock.release")
        context.state.set(GUARDED, "by step")
        return dead_end()


class Long(Step[None]):
    """Runs until cancelled (or released), heartbeating."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.probe.record(context)
        await context.heartbeat()
        try:
            assert self.probe.release is not None
            await self.probe.release.wait()
        except asyncio.CancelledError:
            self.probe.cancelled.append(context.step_execution_id)
            raise
        append_log(context, "long-finished")
        return dead_end()


class Gated(Step[None]):
    """Counts its invocation in a file, marks a file gate and waits for its release file."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def options(self) -> StepOptions:
        return StepOptions(retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(0)))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.probe.record(context)
        await context.heartbeat()
        assert self.probe.state_dir is not None
        (self.probe.state_dir / "gate.reached").write_text(str(context.attempt))
        await wait_for_file(self.probe.state_dir / "gate.release")
        append_log(context, f"gated:{context.attempt}")
        return dead_end()


class EarlyGated(Step[None]):
    """Like ``Gated``, but its gate comes before any heartbeat or event: the attempt has not started.

    It writes ``early.reached`` (``"<pid> <attempt>"``) and waits for ``early.release``.
    """

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def options(self) -> StepOptions:
        return StepOptions(retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(0)))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.probe.record(context)
        assert self.probe.state_dir is not None
        reached = f"{os.getpid()} {context.attempt}"
        (self.probe.state_dir / "early.reached").write_text(reached)
        await wait_for_file(self.probe.state_dir / "early.release")
        await context.heartbeat()
        append_log(context, f"early-gated:{context.attempt}")
        return dead_end()


class GatedWork(Step[str]):
    """A ``Work`` that holds its worker slot at a gate: it writes ``work-<input>.reached``
    (its pid) and waits for ``work.release``, so a test sees which process runs each one."""

    input_type = str

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        self.probe.record(context)
        assert self.probe.state_dir is not None
        (self.probe.state_dir / f"work-{input}.reached").write_text(str(os.getpid()))
        await wait_for_file(self.probe.state_dir / "work.release")
        context.state.set_instance(RESULTS, input, f"done by {context.step_execution_id}")
        context.state.publish(DONE, input)
        return dead_end()


class Cancelled(Step[None]):
    """Started by the ``cancel_long`` RPC after it cancels ``Long``."""

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        append_log(context, "after-cancel")
        return dead_end()


def _send(context: RpcContext, text: str) -> RpcResult[bool]:
    context.state.publish(INBOX, text)
    return RpcResult(True)


def _read_log(context: RpcContext, _: None) -> RpcResult[tuple[str, ...]]:
    return RpcResult(context.state.get(LOG) or ())


def _read_results(context: RpcContext, _: None) -> RpcResult[dict[str, str]]:
    keys = context.state.instance_keys(RESULTS)
    return RpcResult({key: context.state.get_instance(RESULTS, key) or "" for key in keys})


def _guarded_write(context: RpcContext, text: str) -> RpcResult[bool]:
    context.state.set(GUARDED, text)
    return RpcResult(True)


def _cancel_long(context: RpcContext, _: None) -> RpcResult[bool]:
    return RpcResult(True, next_steps=(StepMovement(Cancelled),), canceling_steps=(Long,))


def _cancel_gated(context: RpcContext, _: None) -> RpcResult[bool]:
    return RpcResult(True, next_steps=(StepMovement(Cancelled),), canceling_steps=(Gated,))


def _restart_sleep(context: RpcContext, _: None) -> RpcResult[bool]:
    # Every call cancels the Sleep before it: a session whose finished Steps end cancelled.
    return RpcResult(True, next_steps=(StepMovement(Sleep, 3600.0),), canceling_steps=(Sleep,))


def _pending(context: RpcContext, _: None) -> RpcResult[tuple[str, ...]]:
    return RpcResult(tuple(message.value for message in context.state.pending_messages(INBOX)))


def _delete_first(context: RpcContext, _: None) -> RpcResult[bool]:
    pending = context.state.pending_messages(INBOX)
    return RpcResult(bool(pending) and context.state.delete_message(INBOX, pending[0].message_id))


class EngineTestFlow:
    """A Flow type for engine tests; ``probe`` collects what its Steps saw."""

    def __init__(self, probe: Probe | None = None, flow_type: str = "EngineTest") -> None:
        self.probe = probe or Probe()
        self._flow_type = flow_type
        self._start = Start(self.probe)
        self._steps: list[Step[Any]] = [
            self._start,
            AwaitMessage(),
            Sleep(),
            Work(self.probe),
            Join(),
            Flaky(self.probe),
            Recover(self.probe),
            HoldLock(self.probe),
            GatedLock(self.probe),
            Long(self.probe),
            Gated(self.probe),
            EarlyGated(self.probe),
            GatedWork(self.probe),
            Cancelled(),
        ]
        self._rpcs: dict[str, Rpc[Any, Any]] = {
            rpc.name: rpc
            for rpc in (
                Rpc("send", str, bool, _send),
                Rpc("read_log", type(None), tuple[str, ...], _read_log),
                Rpc(
                    "read_results",
                    type(None),
                    dict[str, str],
                    _read_results,
                    loads=(MapLoad(RESULTS),),
                ),
                Rpc("guarded_write", str, bool, _guarded_write, locks=(AttributeLock(GUARDED),)),
                Rpc("cancel_long", type(None), bool, _cancel_long),
                Rpc("cancel_gated", type(None), bool, _cancel_gated),
                Rpc("restart_sleep", type(None), bool, _restart_sleep),
                Rpc("pending", type(None), tuple[str, ...], _pending, channel_loads=(INBOX,)),
                # Lists waiting messages without declaring the Channel: refused, as on Dex.
                Rpc("pending_unloaded", type(None), tuple[str, ...], _pending),
                Rpc(
                    "delete_first",
                    type(None),
                    bool,
                    _delete_first,
                    is_transactional=True,
                    channel_loads=(INBOX,),
                ),
            )
        }

    @property
    def flow_type(self) -> str:
        return self._flow_type

    @property
    def start_step(self) -> Step[Any]:
        return self._start

    @property
    def steps(self) -> Sequence[Step[Any]]:
        return self._steps

    @property
    def schema(self) -> Sequence[Any]:
        return (LOG, RESULTS, INBOX, DONE, GUARDED)

    @property
    def stream(self) -> StreamDef[str]:
        return EVENTS

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        return self._rpcs


class Held(Step[None]):
    """Runs until the test releases it, then goes to ``After``; notes each attempt."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.attempts: list[int] = []

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.attempts.append(context.attempt)
        self.started.set()
        await self.release.wait()
        return go_to(After, None)


class After(Step[None]):
    """Sets its ``ran`` event."""

    def __init__(self) -> None:
        self.ran = asyncio.Event()

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.ran.set()
        return complete(None)


class HeldFlow:
    """``Held``, which the test releases, then ``After``: a Step whose commit hands one off."""

    flow_type = "Held"
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.held, self.after = Held(), After()
        self.start_step: Step[Any] = self.held
        self.steps: Sequence[Step[Any]] = (self.held, self.after)


class OneStepFlow:
    """A Flow type of one Step, ``step``, with no Attributes or RPCs, writing to ``stream``."""

    schema: Sequence[Any] = ()
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(
        self, flow_type: str, step: Step[Any], stream: StreamDef[Any] | None = None
    ) -> None:
        self.flow_type = flow_type
        self.stream = stream
        self.start_step: Step[Any] = step
        self.steps: Sequence[Step[Any]] = (step,)


async def run_until(
    engine: LocalEngine, flow: FlowDefinition, status: FlowStatus, flow_id: str = "f1"
) -> None:
    """Start ``flow_id``, a run of ``flow``, and run a worker until the run has ``status``."""
    client = LocalFlowClient(engine)
    async with running_worker(engine):
        await client.start_flow(flow, flow_id, None)
        await wait_for_status(client, flow_id, status)


@contextlib.asynccontextmanager
async def running_worker(
    engine: LocalEngine, *, max_concurrent_tasks: int = 16
) -> AsyncIterator[LocalWorker]:
    """A worker running on this loop, for at most 20 s, stopped on the way out."""
    worker = LocalWorker(engine, max_concurrent_tasks=max_concurrent_tasks)
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(20):
            yield worker
    finally:
        await worker.stop()
        await task
