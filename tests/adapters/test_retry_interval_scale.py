"""The engine's ``retry_interval_scale`` multiplies each retry policy's interval, for tests
that need not wait a policy's seconds; an attempt's own ``RetryAfterError`` delay stays
as asked, and 1 (the default) waits the policy's interval as it is."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.runtime import EngineRuntime
from dex_agents.ports.engine import RetryPolicy, Step, StepDecision, StepOptions
from dex_agents.ports.errors import RetryAfterError
from dex_agents.ports.flow_rows import ExecutionRow, FlowStatus
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.step_contexts import StepContext
from dex_agents.testing import RETRY_INTERVAL_SCALE_ENV, AgentTestStack
from tests.adapters.engine_flows import OneStepFlow, running_worker
from tests.adapters.retry_scale_worker import build_flow
from tests.support.flow_runs import wait_for_status

REPO_ROOT = Path(__file__).resolve().parents[2]

NOW = datetime(2026, 1, 1, tzinfo=UTC)
"""The engine's clock, which stands still: a retry made due by it never becomes due."""


class Fails(Step[None]):
    """Fails every attempt under a policy of 4 s, then 8 s; or asks for ``retry_after``."""

    def __init__(self, retry_after: timedelta | None = None) -> None:
        self.retry_after = retry_after

    def options(self) -> StepOptions:
        return StepOptions(retry=RetryPolicy(initial_interval=timedelta(seconds=4)))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        if self.retry_after is not None:
            raise RetryAfterError(self.retry_after, RuntimeError("rate limited"))
        raise RuntimeError("failed")


async def retry_of_first_attempt(store: FlowStore, step: Fails, scale: float = 1.0) -> ExecutionRow:
    """The execution ``step``'s first failed attempt left, ready for its second."""
    flow = OneStepFlow("Fails", step)
    engine = LocalEngine(
        store,
        [flow],
        poll_interval=timedelta(milliseconds=20),
        clock=lambda: NOW,
        retry_interval_scale=scale,
    )
    try:
        async with running_worker(engine):
            await LocalFlowClient(engine).start_flow(flow, "f1", None)
            while True:
                (row,) = engine.store.read(lambda tx: tx.flow_executions("f1"))
                if row.attempt == 2:
                    return row
                await asyncio.sleep(0.01)
    finally:
        engine.close()


async def test_by_default_a_retry_waits_the_policy_s_interval(store: FlowStore) -> None:
    row = await retry_of_first_attempt(store, Fails())
    assert row.not_before == NOW + timedelta(seconds=4)


async def test_a_scale_shortens_the_policy_s_interval(store: FlowStore) -> None:
    row = await retry_of_first_attempt(store, Fails(), 0.01)
    assert row.not_before == NOW + timedelta(milliseconds=40)


async def test_a_scale_leaves_the_wait_an_attempt_asked_for(store: FlowStore) -> None:
    step = Fails(retry_after=timedelta(seconds=30))
    row = await retry_of_first_attempt(store, step, 0.01)
    assert row.not_before == NOW + timedelta(seconds=30)


@pytest.mark.parametrize("scale", [0, -1, 1.5, float("nan"), True, "0.1", None])
def test_a_scale_that_is_not_above_0_and_at_most_1_is_refused_by_name(
    store: FlowStore, scale: object
) -> None:
    message = f"retry_interval_scale must be above 0 and at most 1, not {scale!r}"
    with pytest.raises(ValueError, match=r"^retry_interval_scale ") as engine_error:
        LocalEngine(store, [OneStepFlow("Fails", Fails())], retry_interval_scale=scale)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^retry_interval_scale ") as runtime_error:
        EngineRuntime(None, [OneStepFlow("Fails", Fails())], retry_interval_scale=scale)  # type: ignore[arg-type]
    assert str(engine_error.value) == str(runtime_error.value) == message


async def test_a_worker_child_retries_at_the_scale_its_environment_gives(tmp_path: Path) -> None:
    # The policy waits an hour before the second attempt; a ten-millionth of it is 0.36 ms.
    flow = build_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.adapters.retry_scale_worker",
        worker_cwd=REPO_ROOT,
        worker_env={RETRY_INTERVAL_SCALE_ENV: "0.0000001"},
    ) as stack:
        await stack.start_worker()
        await stack.client.start_flow(flow, "f1", None)
        await wait_for_status(stack.client, "f1", FlowStatus.COMPLETED)
        (row,) = await stack.read_step_history("f1")
        assert row.final_attempt == 2
