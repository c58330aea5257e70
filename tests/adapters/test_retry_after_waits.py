"""A failed attempt waits before the next one: its retry policy's interval, or the delay
its ``RetryAfterError`` asks for, within the policy. A delay no date can end takes the
failure route now; a policy's interval, however many attempts it allows, is capped."""

from __future__ import annotations

from datetime import timedelta

from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.ports.engine import RetryPolicy, Step, StepDecision, StepOptions
from dex_agents.ports.errors import RetryAfterError
from dex_agents.ports.flow_rows import ExecutionStatus, FlowStatus
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.step_contexts import StepContext
from tests.adapters.engine_flows import OneStepFlow, run_until

# Within timedelta's range, past datetime's: what a provider's broken Retry-After
# (some 300 billion seconds) gives.
ENDLESS = timedelta(days=999_999_000)


class Fails(Step[None]):
    """Fails every attempt, under a policy whose intervals grow a millionfold each time."""

    def options(self) -> StepOptions:
        return StepOptions(
            retry=RetryPolicy(
                maximum_attempts=8,
                initial_interval=timedelta(milliseconds=1),
                backoff_coefficient=1e6,
                maximum_interval=timedelta(milliseconds=1),
            )
        )

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        raise RuntimeError("failed")


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


async def fails(store: FlowStore, step: Step[None], attempts: int) -> None:
    flow = OneStepFlow(type(step).__name__, step)
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    # Until 2026-12-07 the failure's commit raised OverflowError: the execution
    # stayed running, leased, and ran again once its lease lapsed.
    await run_until(engine, flow, FlowStatus.FAILED)
    (row,) = engine.store.read(lambda tx: tx.flow_executions("f1"))
    assert (row.status, row.attempt, row.lease_owner) == (ExecutionStatus.FAILED, attempts, None)
    engine.close()


async def test_a_wait_past_any_date_fails_within_a_total_duration(store: FlowStore) -> None:
    await fails(store, RateLimited(timedelta(minutes=30)), 1)


async def test_a_wait_past_any_date_fails_without_a_total_duration(store: FlowStore) -> None:
    await fails(store, RateLimited(None), 1)


def test_a_policy_s_interval_is_capped_however_many_attempts_it_allows() -> None:
    # 2 ** 47 seconds is past what a timedelta holds; the policy's cap is a minute.
    assert RetryPolicy(maximum_attempts=100).delay_before(49) == timedelta(minutes=1)
    assert RetryPolicy(maximum_attempts=2000).delay_before(1100) == timedelta(minutes=1)


async def test_a_policy_whose_intervals_outgrow_a_timedelta_runs_every_attempt(
    store: FlowStore,
) -> None:
    # Until 2026-12-07 the failure of attempt 4 raised OverflowError in its commit (10 ** 15
    # seconds before the cap): the execution stayed running, leased, and failed so again.
    await fails(store, Fails(), 8)
