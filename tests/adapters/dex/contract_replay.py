"""Replay a recorded session through the Dex mapping and say, per case, where Dex disagrees.

Each recorded execution, wait phase left without an execution, and RPC call is
handed to a real Dex ``AsyncWorker`` (the fake-server harness) with the inputs
the embedded engine gave it: the same state, wait result, clock, attempt,
heartbeat checkpoint and recovery error. Its commit is reduced to the normal
forms of ``contract_forms`` and compared; each case keeps the list of fields
that differ, so one disagreement names itself instead of hiding the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import dex
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.dex.contexts import decode_progress, encode_progress
from dex_agents.adapters.dex.wire_values import to_dex
from dex_agents.domain.wire import to_json
from dex_agents.ports.step_contexts import AttemptProgress
from tests.adapters.dex.contract_forms import (
    declared,
    dex_decision,
    dex_movements,
    dex_publishes,
    dex_state,
    dex_wait,
    dex_writes,
    fixed_clock,
    json_of,
    port_decision,
    port_movements,
    port_step_named,
    port_wait,
    wait_inputs,
)
from tests.adapters.dex.contract_runner import FLOW_TYPE, SESSION, contract_flow
from tests.adapters.dex.fake_dex import DexWorkerDriver, WorkerError, running_worker
from tests.adapters.dex.session_recording import (
    RecordedExecution,
    RecordedRpc,
    RecordedWait,
    StepRecorder,
)

UNKNOWN_FAILED_EXECUTION = "FailedStep-1"
"""The failed execution a failure route names when no recorded attempt raised for it."""

CaseKind = Literal["execution", "wait", "rpc"]

REPLAY_TABLE = pytest.StashKey[list[str]]()
"""Where the contract suite leaves ``coverage_table`` for the end of the pytest output."""


@dataclass(frozen=True)
class ReplayedCase:
    """One recorded case replayed on Dex, and the fields in which Dex disagreed."""

    kind: CaseKind
    name: str
    """The Step type, or the RPC name."""
    label: str
    recorded: RecordedExecution | RecordedWait | RecordedRpc
    mismatches: tuple[str, ...]
    failed_step: str | None = None
    """For a failure route's execution: the Step type of the execution it recovers."""


@dataclass(frozen=True)
class Replay:
    """Every replayed case of a recording, and the Flow definition Dex ran them on."""

    flow: AgentSessionFlow
    cases: tuple[ReplayedCase, ...]

    def of(self, name: str, *kinds: CaseKind) -> list[ReplayedCase]:
        """The cases of one Step type or RPC (of ``kinds``, or of any kind)."""
        return [c for c in self.cases if c.name == name and (not kinds or c.kind in kinds)]

    def counts(self, kind: CaseKind) -> Counter[str]:
        """How many cases of ``kind`` were replayed, by name."""
        return Counter(case.name for case in self.cases if case.kind == kind)

    def failure_routes(self) -> Counter[tuple[str, str]]:
        """``(failed Step type, failure route Step type)`` of each replayed failure route."""
        return Counter(
            (case.failed_step, case.name)
            for case in self.cases
            if case.kind == "execution" and case.failed_step is not None
        )


@dataclass
class _Comparison:
    mismatches: list[str] = field(default_factory=list)

    def expect(self, what: str, on_dex: Any, embedded: Any) -> None:
        if on_dex != embedded:
            self.mismatches.append(f"{what}: Dex {on_dex!r} != embedded {embedded!r}")

    def failed(self, what: str, error: WorkerError) -> None:
        # The stack trace stays in the captured log; the cause is enough here.
        self.mismatches.append(f"{what} failed on Dex: {error.error_type}: {error.detail}")


async def _replay_wait(
    flow: AgentSessionFlow, worker: DexWorkerDriver, wait: RecordedWait, check: _Comparison
) -> Mapping[str, Any] | None:
    """Replay a wait phase; the Step-execution locals it left, or ``None`` when it failed."""
    flow.dex_binding.clock = fixed_clock(wait.now)
    waited = await worker.wait_for(
        FLOW_TYPE,
        wait.step_type,
        wait.step_execution_id,
        to_dex(
            flow.dex_binding.input_type(type(port_step_named(flow, wait.step_type))), wait.input
        ),
        flow_id=SESSION,
        **dex_state(flow, wait.read),
    )
    if waited.error is not None:
        check.failed("wait_for", waited.error)
        return None
    check.expect("wait", dex_wait(waited.wait), port_wait(wait.wait))
    return waited.step_locals


async def replay_execution(
    flow: AgentSessionFlow,
    worker: DexWorkerDriver,
    recorder: StepRecorder,
    execution: RecordedExecution,
) -> ReplayedCase:
    """Replay one execute attempt (after its wait phase, if it had one) and compare commits."""
    check = _Comparison()
    step_locals: Mapping[str, Any] = {}
    failed = recorder.failed_execution(execution)
    case = ReplayedCase(
        "execution",
        execution.step_type,
        f"{execution.step_execution_id} attempt {execution.attempt}",
        execution,
        (),
        failed_step=failed.step_type if failed is not None else None,
    )
    if execution.wait is not None:
        waited = await _replay_wait(flow, worker, execution.wait, check)
        if waited is None:
            return _with(case, check)
        step_locals = waited
    channel_results, timers = wait_inputs(flow, execution)
    flow.dex_binding.clock = fixed_clock(execution.now)
    last = execution.last_heartbeat_value
    heartbeat = None if last is None else encode_progress(execution.step_execution_id, True, last)
    recovery = execution.recovery_error
    failed_id = ""
    if recovery is not None:
        # The failure route reads the failed execution's mark: "not started" only
        # when the embedded engine proved it.
        failed_id = failed.step_execution_id if failed is not None else UNKNOWN_FAILED_EXECUTION
        started = recovery.attempt_progress is not AttemptProgress.NOT_STARTED
        heartbeat = encode_progress(failed_id, started, None)
    # Dex hands a failure route the failed Step's input as that Step sent it.
    sender = (
        failed.step_type if recovery is not None and failed is not None else execution.step_type
    )
    outcome = await worker.execute(
        FLOW_TYPE,
        execution.step_type,
        execution.step_execution_id,
        to_dex(port_step_named(flow, sender).input_type, execution.input),
        flow_id=SESSION,
        channel_results=channel_results,
        timer_fired=timers,
        step_locals=step_locals,
        attempt=execution.attempt,
        first_attempt_at=execution.first_attempt_at,
        last_heartbeat_value=heartbeat,
        recovery_error=None if recovery is None else (recovery.detail, recovery.error_type),
        from_step_execution_id=failed_id,
        **dex_state(flow, execution.read),
    )
    if outcome.error is not None:
        check.failed("execute", outcome.error)
        return _with(case, check)
    check.expect("writes", dex_writes(flow, outcome), execution.writes)
    check.expect("publishes", dex_publishes(flow, outcome), execution.publishes)
    check.expect("events", [value for _, value in outcome.stream_writes], execution.events)
    marks = [decode_progress(value) for value in outcome.heartbeats]
    # An earlier attempt that heartbeated reached the Step's code: the mark keeps "started".
    entered = (execution.step_execution_id, heartbeat is not None and recovery is None, last)
    check.expect("entry mark", marks[:1], [entered])
    check.expect(
        "heartbeat checkpoints",
        [mark[2] if mark else None for mark in marks[1:]],
        [checkpoint if checkpoint is not None else last for checkpoint in execution.heartbeats],
    )
    assert execution.decision is not None
    check.expect("decision", dex_decision(flow, outcome), port_decision(flow, execution.decision))
    return _with(case, check)


async def replay_lone_wait(
    flow: AgentSessionFlow, worker: DexWorkerDriver, wait: RecordedWait
) -> ReplayedCase:
    """Replay a wait phase whose execution never committed (cancelled, or its attempts failed)."""
    check = _Comparison()
    await _replay_wait(flow, worker, wait, check)
    case = ReplayedCase("wait", wait.step_type, f"{wait.step_execution_id} wait", wait, ())
    return _with(case, check)


async def replay_rpc(
    flow: AgentSessionFlow, worker: DexWorkerDriver, call: RecordedRpc, index: int
) -> ReplayedCase:
    """Replay one RPC transaction and compare its output and commit."""
    check = _Comparison()
    case = ReplayedCase("rpc", call.name, f"{call.name} #{index}", call, ())
    rpc = flow.rpcs[call.name]
    flow.dex_binding.clock = fixed_clock(call.now)
    pending: dict[str | tuple[str, str], Sequence[tuple[str, object]]] = {
        channel: [
            (message_id, to_dex(declared(flow, channel), value)) for message_id, value in messages
        ]
        for channel, messages in call.pending.items()
    }
    outcome = await worker.rpc(
        FLOW_TYPE,
        call.name,
        to_dex(rpc.input_type, call.input),
        flow_id=SESSION,
        pending_channel_messages=pending,
        **dex_state(flow, call.read),
    )
    if outcome.error is not None:
        check.failed("the RPC", outcome.error)
        return _with(case, check)
    check.expect("output", json_of(rpc.output_type, outcome.output), to_json(call.output))
    check.expect("writes", dex_writes(flow, outcome), call.writes)
    check.expect("publishes", dex_publishes(flow, outcome), call.publishes)
    check.expect(
        "deleted messages",
        [message_id for _, _, message_id in outcome.channel_deletions],
        call.deleted_messages,
    )
    check.expect(
        "next steps",
        dex_movements(flow, outcome.next_steps),
        port_movements(flow, call.next_steps),
    )
    check.expect(
        "cancelled Step types",
        sorted(outcome.canceling_step_types),
        sorted(step.step_type for step in call.canceling_steps),
    )
    return _with(case, check)


def _with(case: ReplayedCase, check: _Comparison) -> ReplayedCase:
    return ReplayedCase(
        case.kind, case.name, case.label, case.recorded, tuple(check.mismatches), case.failed_step
    )


async def replay_recording(recorder: StepRecorder) -> Replay:
    """Replay every recorded execution, lone wait and RPC call on a fresh Dex-bound Flow."""
    flow = contract_flow()
    cases: list[ReplayedCase] = []
    async with running_worker(dex.Registry([flow], allow_async_handlers=True)) as worker:
        for execution in recorder.executions:
            cases.append(await replay_execution(flow, worker, recorder, execution))
        for wait in recorder.waits_without_execution():
            cases.append(await replay_lone_wait(flow, worker, wait))
        for index, call in enumerate(recorder.rpc_calls, start=1):
            cases.append(await replay_rpc(flow, worker, call, index))
    return Replay(flow, tuple(cases))


def unreplayed(replay: Replay) -> list[str]:
    """What the Flow definition declares and no replayed case reached, by name.

    Step types without a replayed execution, then RPCs without a replayed call,
    each in the Flow's order. Read from the definition Dex ran, never from a list.
    """
    steps = [step.step_type for step in replay.flow.steps]
    return [f"Step type {name}" for name in steps if not replay.of(name, "execution")] + [
        f"RPC {name}" for name in replay.flow.rpcs if not replay.of(name, "rpc")
    ]


def coverage_table(replay: Replay) -> list[str]:
    """Every Step type and RPC of the Flow with how many cases of it were replayed."""
    executions, waits, rpcs = (replay.counts(kind) for kind in ("execution", "wait", "rpc"))
    step_types = [step.step_type for step in replay.flow.steps]
    width = max(len(name) for name in [*step_types, *replay.flow.rpcs])
    lines = [f"{'Step type':<{width}}  executions  lone waits"]
    lines += [f"{name:<{width}}  {executions[name]:>10}  {waits[name]:>10}" for name in step_types]
    lines += ["", f"{'RPC':<{width}}  calls"]
    lines += [f"{name:<{width}}  {rpcs[name]:>5}" for name in replay.flow.rpcs]
    lines += ["", "failure route (failed Step -> route)  executions"]
    lines += [
        f"{failed} -> {route}: {count}"
        for (failed, route), count in sorted(replay.failure_routes().items())
    ]
    return lines
