"""An attempt that raises ``RetryAfterError`` waits its delay before the next attempt,
within its retry policy: a delay no date can end takes the failure route now."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.probes import wait_until
from dex_agents.ports.engine import RetryPolicy, Rpc, Step, StepDecision, StepOptions
from dex_agents.ports.errors import RetryAfterError
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.step_contexts import StepContext
from tests.adapters.engine_flows import running_worker

# Within timedelta's range, past datetime's: what a provider's broken Retry-After
# (some 300 billion seconds) gives.
ENDLESS = timedelta(days=999_999_000)


class RateLimited(Step[None]):
    """Always asks for a wait of ``delay`` before its next attempt."""

    def __init__(self, total_duration: timedelta | None) -> None:
        self.total_duration = total_duration

    def options(self) -> StepOptions:
        return StepOptions(
            retry=RetryPolicy(maximum_attempts=3, total_duration=self.total_duration)
        )

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        raise RetryAfterError(ENDLESS, RuntimeError("rate limited"))


class RateLimitedFlow:
    flow_type = "RateLimited"
    schema: Sequence[Any] = ()
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self, total_duration: timedelta | None) -> None:
        self.start_step: Step[Any] = RateLimited(total_duration)
        self.steps: Sequence[Step[Any]] = (self.start_step,)


async def fails_at_once(store: FlowStore, total_duration: timedelta | None) -> None:
    flow = RateLimitedFlow(total_duration)
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    client = LocalFlowClient(engine)
    async with running_worker(engine):
        await client.start_flow(flow, "f1", None)

        async def failed() -> bool:
            return (await client.describe_flow("f1")).status == "failed"

        # Until 2026-12-07 the failure's commit raised OverflowError: the execution
        # stayed running, leased, and ran again once its lease lapsed.
        seen: bool = await wait_until("the Flow to fail", failed)
        assert seen
    (row,) = engine.store.read(lambda tx: tx.flow_executions("f1"))
    assert (row.status, row.attempt, row.lease_owner) == (ExecutionStatus.FAILED, 1, None)
    engine.close()


async def test_a_wait_past_any_date_fails_within_a_total_duration(store: FlowStore) -> None:
    await fails_at_once(store, timedelta(minutes=30))


async def test_a_wait_past_any_date_fails_without_a_total_duration(store: FlowStore) -> None:
    await fails_at_once(store, None)
