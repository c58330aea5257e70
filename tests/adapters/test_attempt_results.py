"""The embedded engine tells an attempt what became of its result (``on_attempt_result``).

The session's spans use it to end only once their attempt's result is committed,
or to say why it was dropped (``tests/tracing/test_dropped_results.py``). A lease
lost before the commit is tested there, over a whole session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.ports.engine import (
    RetryPolicy,
    Rpc,
    Step,
    StepDecision,
    StepOptions,
    dead_end,
    go_to,
)
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.step_contexts import (
    AttemptResult,
    ResultDropReason,
    StepContext,
    on_attempt_result,
)
from tests.adapters.engine_flows import running_worker


class Unregistered(Step[None]):
    """A Step no Flow here registers: a decision to go to it cannot be committed."""

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        return dead_end()


class Reporting(Step[str]):
    """Notes what its engine reports about each attempt's result; its input picks the outcome."""

    input_type = str

    def __init__(self, store: MemoryFlowStore) -> None:
        self.store = store
        self.registered: list[bool] = []
        self.results: list[AttemptResult] = []
        self.statuses_when_reported: list[ExecutionStatus] = []
        self.reported = asyncio.Event()

    def options(self) -> StepOptions:
        return StepOptions(retry=RetryPolicy(maximum_attempts=1))

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        self.registered.append(on_attempt_result(context, self._report))
        if input == "raise":
            raise RuntimeError("the attempt failed")
        if input == "unregistered":
            return go_to(Unregistered)
        return dead_end()

    def _report(self, result: AttemptResult) -> None:
        self.results.append(result)
        # What the store holds as the callback runs: the commit came first.
        (row,) = self.store.run(lambda tx: list(tx.flow_executions("f1")))
        self.statuses_when_reported.append(row.status)
        self.reported.set()


class ReportingFlow:
    flow_type = "Reporting"
    schema: Sequence[Any] = ()
    stream: StreamDef[Any] | None = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self, store: MemoryFlowStore) -> None:
        self.step = Reporting(store)
        self.start_step: Step[Any] = self.step
        self.steps: Sequence[Step[Any]] = (self.step,)


async def reported(input: str) -> tuple[list[bool], list[AttemptResult]]:
    store = MemoryFlowStore()
    flow = ReportingFlow(store)
    engine = LocalEngine(store, [flow])
    try:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", input)
            await flow.step.reported.wait()
    finally:
        engine.close()
        store.close()
    # What the store held as the callback ran: the attempt's outcome was committed first,
    # except a result the store refused, reported before its failure is recorded.
    expected = {
        "done": ExecutionStatus.COMPLETED,
        "raise": ExecutionStatus.FAILED,
        "unregistered": ExecutionStatus.RUNNING,
    }[input]
    assert flow.step.statuses_when_reported == [expected]
    return flow.step.registered, flow.step.results


async def test_a_committed_result_is_reported_committed() -> None:
    assert await reported("done") == ([True], [AttemptResult()])


async def test_a_failed_attempt_whose_failure_is_recorded_is_not_a_dropped_result() -> None:
    # Its span already says it failed; its retry policy decides what comes next.
    assert await reported("raise") == ([True], [AttemptResult()])


async def test_a_result_the_store_refuses_is_reported_dropped_with_the_error() -> None:
    registered, results = await reported("unregistered")
    assert registered == [True]
    (result,) = results
    assert result.dropped is ResultDropReason.COMMIT_FAILED
    assert result.error_type == "FlowDefinitionError"
    assert "has no Step Unregistered" in result.detail


def test_a_context_without_on_result_runs_nothing_and_says_so() -> None:
    # As on Dex, whose server commits without telling the Worker: the caller acts now.
    class Plain:
        pass

    calls: list[AttemptResult] = []
    assert on_attempt_result(Plain(), calls.append) is False  # type: ignore[arg-type]
    assert calls == []
