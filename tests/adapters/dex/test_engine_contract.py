"""One contract, two engines: the Dex mapping commits what the embedded engine commits.

A scripted session runs on the embedded engine: a turn with a read, an approved
write and a question; a turn whose approval a steer cancels; a durable wait; a
failing model call that takes the failure route; and a turn that cancel_turn
ends while its approval waits. Every Step
execution is recorded with what it read and what it committed. Each one is then
replayed through a real Dex ``AsyncWorker`` (the fake-server harness) with the
same inputs: the same state, wait result, clock and attempt. The wait conditions,
writes, publishes, Stream events, heartbeats and decisions must be the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import dex
import pytest

from dex_agents import AgentSessionFlow, AgentSessionOptions, RunModelLimit
from dex_agents.adapters.dex.contexts import decode_progress, encode_progress
from dex_agents.adapters.dex.wire_values import to_dex
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import (
    AttemptProgress,
    Rpc,
)
from dex_agents.ports.runner import DeferredToolExecution
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
from tests.adapters.dex.fake_dex import DexWorkerDriver, running_worker
from tests.adapters.dex.session_recording import StepRecorder, record_steps
from tests.app.scripted_runner import ScriptedRunner

FLOW_TYPE = "ContractAgent"
SESSION = "s1"


async def _lookup(call: DeferredToolExecution) -> str:
    return f"found {call.tool_call.arguments}"


async def _refund(call: DeferredToolExecution) -> str:
    return f"refunded {call.tool_call.arguments}"


class _RecordedFlow(AgentSessionFlow):
    """The session Flow whose RPCs a recorder wraps, for the embedded engine's run."""

    recorder: StepRecorder | None = None

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        rpcs = super().rpcs
        if self.recorder is None:
            return rpcs
        return {name: self.recorder.recording_rpc(rpc) for name, rpc in rpcs.items()}


def _flow(flow_class: type[AgentSessionFlow] = AgentSessionFlow) -> AgentSessionFlow:
    options = AgentSessionOptions(
        tool_policies={
            "lookup": ToolPolicy(ToolEffect.READ),
            "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        },
        built_in_tools=frozenset({BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT}),
        # One attempt, so a failing model call takes the failure route at once.
        run_model_limit=RunModelLimit(maximum_attempts=1),
    )
    runner = ScriptedRunner({"lookup": _lookup, "refund": _refund})
    return flow_class(runner, flow_type=FLOW_TYPE, options=options)


async def _until(sessions: Any, description: str, probe: Any) -> Any:
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        snapshot: AgentSnapshot = await sessions.get_agent_snapshot(SESSION)
        found = probe(snapshot)
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {description}: {snapshot}")
        await asyncio.sleep(0.01)


def _idle_after(turns: int) -> Callable[[AgentSnapshot], bool]:
    def idle(snapshot: AgentSnapshot) -> bool:
        state = snapshot.state
        return (
            state is not None
            and state.turn_count == turns
            and state.status == "waiting_for_user_message"
        )

    return idle


async def _run_scripted_session() -> StepRecorder:
    """The scenario on the embedded engine, recorded."""
    from dex_agents import AgentSessionClient

    flow = _flow(_RecordedFlow)
    recorder = record_steps(flow)
    assert isinstance(flow, _RecordedFlow)
    flow.recorder = recorder
    engine = LocalEngine(MemoryFlowStore(), [flow], poll_interval=timedelta(milliseconds=20))
    client = LocalFlowClient(engine)
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())
    sessions = AgentSessionClient(client, flow)
    try:
        await sessions.start_session(
            SESSION,
            'call lookup {"q": 1} and refund {"order": 7} and '
            'ask_user {"question": "Which colour?", "choices": ["red", "blue"]}',
        )
        await _until(
            sessions, "an approval and a question", lambda s: len(s.pending_interrupts) == 2
        )
        assert await sessions.resolve_interrupt(SESSION, "call-2", approved=True)
        assert await sessions.answer_question(SESSION, "call-3", "blue")
        await _until(
            sessions,
            "the first turn to end",
            lambda s: s.state.turn_count == 1 and s.state.status == "waiting_for_user_message",
        )
        assert await sessions.send_user_message(SESSION, 'call refund {"order": 8}')
        await _until(sessions, "a second approval", lambda s: len(s.pending_interrupts) == 1)
        assert await sessions.steer_user_message(SESSION, text="never mind")
        await _until(
            sessions,
            "the steered turn to end",
            lambda s: s.state.turn_count == 3 and s.state.status == "waiting_for_user_message",
        )
        assert await sessions.send_user_message(
            SESSION, 'call durable_wait {"duration_seconds": 1, "reason": "build"}'
        )
        await _until(sessions, "the durable wait's turn to end", _idle_after(4))
        assert await sessions.send_user_message(SESSION, "fail")
        await _until(sessions, "the failed turn to end", _idle_after(5))
        assert await sessions.send_user_message(SESSION, 'call refund {"order": 9}')
        snapshot = await _until(
            sessions, "a third approval", lambda s: s if s.pending_interrupts else None
        )
        assert await sessions.cancel_turn(SESSION, snapshot.state.active_turn_id)
        await _until(sessions, "the cancelled turn to end", _idle_after(6))
    finally:
        await worker.stop()
        await task
        engine.close()
    return recorder


@pytest.fixture(scope="module")
def recorded() -> StepRecorder:
    return asyncio.run(_run_scripted_session())


@pytest.fixture
async def driver() -> AsyncIterator[tuple[AgentSessionFlow, DexWorkerDriver]]:
    flow = _flow()
    async with running_worker(dex.Registry([flow], allow_async_handlers=True)) as worker:
        yield flow, worker


# ---------------------------------------------------------------------------
# The contract


def test_the_scenario_ran_every_kind_of_step(recorded: StepRecorder) -> None:
    kinds = {execution.step_type for execution in recorded.executions}
    assert {
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "AwaitQuestionAnswer",
        "ResumeTurn",
        "AwaitUserMessage",
        "ApplyTurnControl",
        "AwaitTimer",
        "RecordTurnFailure",
        "FinishTurnCancellation",
    } <= kinds


async def test_every_step_commits_the_same_on_dex(
    recorded: StepRecorder, driver: tuple[AgentSessionFlow, DexWorkerDriver]
) -> None:
    flow, worker = driver
    compared = 0
    for execution in recorded.executions:
        label = f"{execution.step_execution_id} attempt {execution.attempt}"
        step_locals: Mapping[str, Any] = {}
        if execution.wait is not None:
            wait = execution.wait
            flow.dex_binding.clock = fixed_clock(wait.now)
            waited = await worker.wait_for(
                FLOW_TYPE,
                wait.step_type,
                wait.step_execution_id,
                to_dex(
                    flow.dex_binding.input_type(type(port_step_named(flow, wait.step_type))),
                    wait.input,
                ),
                flow_id=SESSION,
                **dex_state(flow, wait.read),
            )
            assert waited.error is None, f"{label}: {waited.error}"
            assert dex_wait(waited.wait) == port_wait(wait.wait), label
            step_locals = waited.step_locals
        channel_results, timers = wait_inputs(flow, execution)
        flow.dex_binding.clock = fixed_clock(execution.now)
        port_step = port_step_named(flow, execution.step_type)
        last = execution.last_heartbeat_value
        heartbeat = (
            None if last is None else encode_progress(execution.step_execution_id, True, last)
        )
        recovery = execution.recovery_error
        failed_step = ""
        if recovery is not None:
            # The failure route reads the failed execution's mark: "not started" only
            # when the embedded engine proved it.
            failed_step = "FailedStep-1"
            never_started = recovery.attempt_progress is AttemptProgress.NOT_STARTED
            heartbeat = encode_progress(failed_step, not never_started, None)
        outcome = await worker.execute(
            FLOW_TYPE,
            execution.step_type,
            execution.step_execution_id,
            to_dex(port_step.input_type, execution.input),
            flow_id=SESSION,
            channel_results=channel_results,
            timer_fired=timers,
            step_locals=step_locals,
            attempt=execution.attempt,
            first_attempt_at=execution.first_attempt_at,
            last_heartbeat_value=heartbeat,
            recovery_error=None if recovery is None else (recovery.detail, recovery.error_type),
            from_step_execution_id=failed_step,
            **dex_state(flow, execution.read),
        )
        assert outcome.error is None, f"{label}: {outcome.error}"
        assert dex_writes(flow, outcome) == execution.writes, label
        assert dex_publishes(flow, outcome) == execution.publishes, label
        assert [value for _, value in outcome.stream_writes] == execution.events, label
        marks = [decode_progress(value) for value in outcome.heartbeats]
        assert marks[0] == (execution.step_execution_id, False, last), label
        assert [mark[2] if mark else None for mark in marks[1:]] == [
            checkpoint if checkpoint is not None else last for checkpoint in execution.heartbeats
        ], label
        assert execution.decision is not None
        assert dex_decision(flow, outcome) == port_decision(flow, execution.decision), label
        compared += 1
    assert compared == len(recorded.executions) > 10


async def test_every_rpc_commits_the_same_on_dex(
    recorded: StepRecorder, driver: tuple[AgentSessionFlow, DexWorkerDriver]
) -> None:
    flow, worker = driver
    names = [call.name for call in recorded.rpc_calls]
    assert {"send_user_message", "resolve_interrupt", "answer_question"} <= set(names)
    assert {"steer_user_message", "get_agent_snapshot"} <= set(names)
    for call in recorded.rpc_calls:
        rpc = flow.rpcs[call.name]
        flow.dex_binding.clock = fixed_clock(call.now)
        pending: dict[str | tuple[str, str], Sequence[tuple[str, object]]] = {
            channel: [
                (message_id, to_dex(declared(flow, channel), value))
                for message_id, value in messages
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
        assert outcome.error is None, f"{call.name}: {outcome.error}"
        assert json_of(rpc.output_type, outcome.output) == to_json(call.output), call.name
        assert dex_writes(flow, outcome) == call.writes, call.name
        assert dex_publishes(flow, outcome) == call.publishes, call.name
        assert [message_id for _, _, message_id in outcome.channel_deletions] == (
            call.deleted_messages
        ), call.name
        assert dex_movements(flow, outcome.next_steps) == port_movements(flow, call.next_steps)
        assert sorted(outcome.canceling_step_types) == sorted(
            step.step_type for step in call.canceling_steps
        )
