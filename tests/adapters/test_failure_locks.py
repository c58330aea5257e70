"""A failing Step's movement can name locks its failure route holds (``StepOptions.failure_locks``):
the route of one input locks that input's instance, which its static options cannot name."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.codec import decode_options, encode_options
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.registry import register_flows
from dex_agents.ports.engine import (
    AttributeLock,
    RetryPolicy,
    Rpc,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    dead_end,
    go_to_many,
)
from dex_agents.ports.flow_client import EXECUTE_FAILED_EVENT
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.step_contexts import StepContext
from tests.adapters.engine_flows import RESULTS, running_worker

KEY_LOCK = AttributeLock(RESULTS, "k")


class Begin(Step[None]):
    async def execute(self, context: StepContext, input: None) -> StepDecision:
        holder = StepMovement(Holder, None, StepOptions(locks=(KEY_LOCK,)))
        failing = StepMovement(
            Failing,
            "k",
            StepOptions(
                retry=RetryPolicy(maximum_attempts=1),
                failure_step=Route,
                failure_locks=(KEY_LOCK,),
            ),
        )
        return go_to_many(holder, failing)


class Holder(Step[None]):
    """Holds ``Results/k`` until the test releases it."""

    release = asyncio.Event()

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        await self.release.wait()
        return dead_end()


class Failing(Step[str]):
    input_type = str

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        raise RuntimeError("failed")


class Route(Step[str]):
    input_type = str

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        return dead_end()


class LockFlow:
    flow_type = "Locks"
    schema: Sequence[Any] = (RESULTS,)
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.start_step: Step[Any] = Begin()
        self.steps: Sequence[Step[Any]] = (self.start_step, Holder(), Failing(), Route())


def test_failure_locks_are_stored_with_the_movement_s_options() -> None:
    registered = register_flows([LockFlow()])["Locks"]
    options = StepOptions(failure_step=Route, failure_locks=(KEY_LOCK,))
    text = encode_options(options)
    assert decode_options(text, registered.steps, registered.schema) == options
    # Options stored before failure_locks existed name none.
    data = json.loads(text)
    del data["failure_locks"]
    older = json.dumps(data)
    decoded = decode_options(older, registered.steps, registered.schema)
    assert decoded.failure_locks == ()
    # Options that name none are stored as before.
    assert json.loads(encode_options(StepOptions(failure_step=Route))) == data


async def test_a_failure_route_waits_for_the_locks_the_failing_movement_names() -> None:
    Holder.release = asyncio.Event()
    flow = LockFlow()
    engine = LocalEngine(MemoryFlowStore(), [flow], poll_interval=timedelta(milliseconds=20))
    client = LocalFlowClient(engine)

    def route_status() -> ExecutionStatus | None:
        rows = [
            r
            for r in engine.store.read(lambda tx: tx.flow_executions("f1"))
            if r.step_type == "Route"
        ]
        return rows[0].status if rows else None

    async with running_worker(engine):
        await client.start_flow(flow, "f1", None)

        async def failed() -> bool:
            history = await client.read_step_history("f1")
            return any(
                e.step_type == "Failing" and e.event_type == EXECUTE_FAILED_EVENT for e in history
            )

        seen: bool = await wait_until("the failing Step's failure", failed)
        assert seen
        # The failure's commit would have handed the route off at once; Holder holds its lock.
        assert route_status() is ExecutionStatus.READY
        Holder.release.set()
        ran: bool = await wait_until(
            "the route to run", lambda: route_status() is ExecutionStatus.COMPLETED
        )
        assert ran
    engine.close()
