"""A cancellation that reaches an attempt after its Step's code returned, while it waits for its
live-event flusher to unwind (``LocalStepContext.wait_closed``), before its result commits.

The attempt goes on to commit, and the commit decides: a cancellation the store recorded
first (``cancel_turn``'s commit) ends the execution cancelled and drops its decision, so the
cancel and the result never both take effect. Were the cancellation to end the attempt's
task there instead, the execution would stay leased to nobody running it until its lease
lapsed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from dex_agents.adapters.local import transitions
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.engine import Rpc, Step, StepDecision, complete, go_to
from dex_agents.ports.flow_client import STEP_CANCELLED_EVENT
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.step_contexts import StepContext
from tests.adapters.engine_flows import EVENTS, running_worker


class Returns(Step[None]):
    """Writes a live event, has its own cancellation recorded, and returns: the worker learns
    of the cancellation (as from a claim round) once the attempt waits at ``wait_closed``."""

    def __init__(self) -> None:
        self.engine: LocalEngine | None = None
        self.worker: LocalWorker | None = None
        self.delivered = asyncio.Event()

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        engine, worker = self.engine, self.worker
        assert engine is not None
        assert worker is not None
        context.write_event(EVENTS, "a text delta")  # its flusher sleeps now
        own: list[int] = []

        def cancel(tx: StoreTransaction) -> None:
            own.extend(
                r.id for r in tx.flow_executions(context.flow_id) if r.step_type == "Returns"
            )
            transitions.cancel_steps(tx, context.flow_id, ["Returns"], engine.now(), None)

        # Quiet: no claim round looks at it, so only the call below tells the worker.
        await engine.run_quietly(cancel, quiet=lambda _: True)

        def deliver() -> None:
            worker._cancel(set(own))
            self.delivered.set()

        # Runs once this coroutine has returned and the attempt awaits its flusher.
        asyncio.get_running_loop().call_soon(deliver)
        return go_to(After)


class After(Step[None]):
    def __init__(self) -> None:
        self.ran = False

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        self.ran = True
        return complete(None)


class ReturnsFlow:
    flow_type = "Returns"
    schema: Sequence[Any] = ()
    stream = EVENTS
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.returns, self.after = Returns(), After()
        self.start_step: Step[Any] = self.returns
        self.steps: Sequence[Step[Any]] = (self.returns, self.after)


async def test_a_cancellation_that_reaches_a_returned_attempt_drops_its_result() -> None:
    flow = ReturnsFlow()
    engine = LocalEngine(MemoryFlowStore(), [flow], poll_interval=timedelta(hours=1))
    client = LocalFlowClient(engine)
    flow.returns.engine = engine
    try:
        async with running_worker(engine) as worker:
            flow.returns.worker = worker
            await client.start_flow(flow, "f1", None)
            await asyncio.wait_for(flow.returns.delivered.wait(), 20)

            async def ended() -> list[tuple[str, str]] | None:
                history = await client.read_step_history("f1")
                return [(e.step_type, e.event_type) for e in history] or None

            history: list[tuple[str, str]] = await wait_until("the attempt's end", ended)
        assert history == [("Returns", STEP_CANCELLED_EVENT)]
        assert not flow.after.ran
    finally:
        engine.close()
