"""A wait phase whose execution is cancelled while its ``wait_for`` awaits ends cancelled at once.

The worker cancels the wait phase's task for the cancellation the store recorded (an RPC's
``canceling_steps``, ``cancel_turn``). Leases here last an hour, so only the wait phase's own
record of its end can finish the execution within a test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.probes import wait_until
from dex_agents.ports.engine import Rpc, RpcResult, Step, StepDecision, dead_end
from dex_agents.ports.flow_client import STEP_CANCELLED_EVENT
from dex_agents.ports.step_contexts import RpcContext, StepContext, WaitContext
from dex_agents.ports.step_waits import Wait
from tests.adapters.engine_flows import running_worker

HOUR = timedelta(hours=1)


class Looks(Step[None]):
    """A wait phase that awaits I/O (here, an Event the test never sets)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        self.entered.set()
        await asyncio.Event().wait()
        return Wait.skip()

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        return dead_end()


def _cancel(context: RpcContext, _: None) -> RpcResult[bool]:
    return RpcResult(True, canceling_steps=(Looks,))


class LooksFlow:
    flow_type = "Looks"
    schema: Sequence[Any] = ()
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {"cancel": Rpc("cancel", type(None), bool, _cancel)}

    def __init__(self) -> None:
        self.looks = Looks()
        self.start_step: Step[Any] = self.looks
        self.steps: Sequence[Step[Any]] = (self.looks,)


async def test_a_wait_phase_cancelled_while_it_awaits_ends_cancelled() -> None:
    flow = LooksFlow()
    engine = LocalEngine(MemoryFlowStore(), [flow], poll_interval=HOUR, lease_duration=HOUR)
    client = LocalFlowClient(engine)
    try:
        async with running_worker(engine):
            await client.start_flow(flow, "f1", None)
            await asyncio.wait_for(flow.looks.entered.wait(), 20)
            assert await client.invoke_rpc(flow, "f1", "cancel", None)

            async def ended() -> list[tuple[str, str]] | None:
                history = await client.read_step_history("f1")
                return [(e.step_type, e.event_type) for e in history] or None

            # Before, its task stopped and recorded nothing: it stayed running, leased, until
            # the lease lapsed.
            history: list[tuple[str, str]] = await wait_until("the wait phase's end", ended)
            assert history == [("Looks", STEP_CANCELLED_EVENT)]
    finally:
        engine.close()
