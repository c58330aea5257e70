"""One contract, two engines: the Dex mapping commits what the embedded engine commits.

A scripted session (``contract_session``: approvals, questions, steering,
durable waits, tool tasks, retries, failing tools, ordered writes, turn
cancellation, compaction, plan mode, paging) runs on the embedded engine, and
every Step execution, wait phase and RPC is recorded with what it read and what
it committed. Each one is then replayed through a real Dex ``AsyncWorker``
(``contract_replay``) with the same inputs: the same state, wait result, clock,
attempt, checkpoint and recovery error. Wait conditions, writes, publishes,
Stream events, heartbeats and decisions (with every Step option) must be the
same.

The Flow definition itself says what must be replayed: every Step type and
every RPC it declares, and every failure route its Steps declare. A Step type,
RPC or route added without a scenario that reaches it fails here, by name. The
run's counts are printed at the end of the pytest output ("engine contract").

A disagreement the suite found, and the adapter fix it led to, keeps a test of
its own (sub-second retry intervals, which the SDK refuses unless rounded).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.ports.engine import (
    RetryPolicy,
    Rpc,
    RpcResult,
    Step,
    StepDecision,
    StepMovement,
    dead_end,
)
from dex_agents.ports.step_contexts import StepContext
from tests.adapters.dex.contract_replay import (
    REPLAY_TABLE,
    Replay,
    ReplayedCase,
    coverage_table,
    replay_recording,
    unreplayed,
)
from tests.adapters.dex.contract_runner import contract_flow
from tests.adapters.dex.contract_session import run_scripted_session
from tests.adapters.dex.session_recording import RecordedExecution, StepRecorder

_DEFINITION = contract_flow()
STEP_TYPES = [step.step_type for step in _DEFINITION.steps]
RPC_NAMES = list(_DEFINITION.rpcs)

UNREACHABLE_FAILURE_ROUTES = frozenset(
    {
        ("AwaitQuestionAnswer", "RecordToolFailure"),
        ("AwaitTimer", "RecordToolFailure"),
    }
)
"""Declared routes no scenario can take: these Steps run no runner code that could fail.

Only a fault in the session's own code or in the engine would route there. The
route's Step, ``RecordToolFailure``, is replayed from the routes that are reachable."""


def _in_whole_seconds(retry: RetryPolicy) -> bool:
    durations = [retry.initial_interval, retry.maximum_interval, retry.total_duration]
    return all(d is None or d.total_seconds().is_integer() for d in durations)


def _moves_with_sub_second_retry(case: ReplayedCase) -> bool:
    recorded = case.recorded
    if not isinstance(recorded, RecordedExecution) or recorded.decision is None:
        return False
    return any(
        movement.options is not None and not _in_whole_seconds(movement.options.retry)
        for movement in recorded.decision.movements
    )


def _describe(cases: list[ReplayedCase]) -> str:
    return "\n".join(f"{case.label}:\n  " + "\n  ".join(case.mismatches) for case in cases)


@pytest.fixture(scope="module")
def recorded() -> StepRecorder:
    return asyncio.run(run_scripted_session())


@pytest.fixture(scope="module")
def replay(recorded: StepRecorder, pytestconfig: pytest.Config) -> Replay:
    replayed = asyncio.run(replay_recording(recorded))
    pytestconfig.stash[REPLAY_TABLE] = coverage_table(replayed)
    return replayed


# ---------------------------------------------------------------------------
# Coverage: the Flow definition says what must be replayed


def test_every_step_type_and_rpc_of_the_flow_is_replayed(replay: Replay) -> None:
    gaps = unreplayed(replay)
    assert not gaps, (
        f"the engine contract replays no case of: {', '.join(gaps)}; extend contract_session"
        " with a scenario that reaches each"
    )


class UnscriptedStep(Step[None]):
    """A Step no scenario reaches."""

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        return dead_end()


class _GrownFlow(AgentSessionFlow):
    """The session Flow with one Step and one RPC more, which no scenario reaches."""

    @property
    def steps(self) -> Sequence[Step[Any]]:
        return [*super().steps, UnscriptedStep()]

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        unscripted: Rpc[None, bool] = Rpc(
            "unscripted_rpc", type(None), bool, lambda _, __: RpcResult(True)
        )
        return {**super().rpcs, unscripted.name: unscripted}


def test_a_step_type_or_rpc_added_without_a_scenario_is_named(replay: Replay) -> None:
    grown = Replay(contract_flow(_GrownFlow), replay.cases)
    assert unreplayed(grown) == ["Step type UnscriptedStep", "RPC unscripted_rpc"]


def test_every_declared_failure_route_is_replayed(replay: Replay, recorded: StepRecorder) -> None:
    declared: set[tuple[str, str]] = set()
    for step in replay.flow.steps:
        failure = step.options().failure_step
        if failure is not None:
            declared.add((step.step_type, failure.step_type))
    movements: list[StepMovement] = [
        movement
        for execution in recorded.executions
        if execution.decision is not None
        for movement in execution.decision.movements
    ]
    movements += [movement for call in recorded.rpc_calls for movement in call.next_steps]
    for movement in movements:
        if movement.options is not None and movement.options.failure_step is not None:
            declared.add((movement.step.step_type, movement.options.failure_step.step_type))
    missing = declared - set(replay.failure_routes()) - UNREACHABLE_FAILURE_ROUTES
    assert not missing, f"failure routes (failed Step, route) with no replayed case: {missing}"
    assert declared >= UNREACHABLE_FAILURE_ROUTES, "a route listed as unreachable is gone"


def test_record_tool_failure_is_replayed_for_a_read_and_for_a_write(replay: Replay) -> None:
    effects = set()
    for case in replay.of("RecordToolFailure", "execution"):
        assert isinstance(case.recorded, RecordedExecution)
        record = case.recorded.read.instances[("AgentToolCalls", case.recorded.input)]
        assert isinstance(record, AgentToolCall)
        effects.add(record.effect)
    assert {ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE} <= effects


def test_every_recorded_case_is_replayed(replay: Replay, recorded: StepRecorder) -> None:
    counts = {kind: sum(replay.counts(kind).values()) for kind in ("execution", "wait", "rpc")}
    assert counts == {
        "execution": len(recorded.executions),
        "wait": len(recorded.waits_without_execution()),
        "rpc": len(recorded.rpc_calls),
    }


# ---------------------------------------------------------------------------
# The contract, per Step type and per RPC


@pytest.mark.parametrize("step_type", STEP_TYPES)
def test_every_execution_commits_the_same_on_dex(replay: Replay, step_type: str) -> None:
    cases = replay.of(step_type, "execution", "wait")
    failing = [case for case in cases if case.mismatches]
    assert not failing, _describe(failing)


@pytest.mark.parametrize("rpc", RPC_NAMES)
def test_every_rpc_call_commits_the_same_on_dex(replay: Replay, rpc: str) -> None:
    failing = [case for case in replay.of(rpc, "rpc") if case.mismatches]
    assert not failing, _describe(failing)


# ---------------------------------------------------------------------------
# A disagreement found here: sub-second retry intervals (now rounded up by dex_retry)


def test_a_sub_second_retry_interval_reaches_dex_in_whole_seconds(replay: Replay) -> None:
    cases = [case for case in replay.cases if _moves_with_sub_second_retry(case)]
    assert cases
    failing = [case for case in cases if case.mismatches]
    assert not failing, _describe(failing)
