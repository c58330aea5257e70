"""A task's poll that failed before ``cancel_turn`` leaves two Steps to record its call: the
poll's failure route and ``CancelToolTask``. Under the record's lock, which both hold, the
second sees the first's final record and ends, on the embedded engine."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local import handoff
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.domain.runner_outcomes import ToolTaskPollOutcome
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from dex_agents.ports.runner import ToolTaskCancellation, ToolTaskPoll
from tests.app.steering_support import CancellableTaskRunner
from tests.app.test_steering_races import REPORT
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE
from tests.support.session_events import session_events

RECORDER = "RecordToolFailure"  # a read's poll routes its failure here


@dataclass
class FailingPollRunner(CancellableTaskRunner):
    """Every poll fails; the last one stops ``worker`` first, so the failure route it starts
    is handed back unstarted. ``cancel_tool_task`` waits for ``release_cancel``."""

    worker: LocalWorker | None = None
    cancelling: asyncio.Event = field(default_factory=asyncio.Event)
    release_cancel: asyncio.Event = field(default_factory=asyncio.Event)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polls.append(poll)
        if poll.attempt == 3 and self.worker is not None:
            await self.worker.stop()
        raise RuntimeError("the report service is down")

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled_tasks.append(cancellation)
        self.cancelling.set()
        await self.release_cancel.wait()


def _recorder(tx: StoreTransaction) -> ExecutionRow:
    (row,) = [row for row in tx.flow_executions("s1") if row.step_type == RECORDER]
    return row


async def test_a_poll_failed_before_cancel_turn_is_recorded_once(store: FlowStore) -> None:
    runner = FailingPollRunner(interval=0)
    runner.release.set()
    flow = AgentSessionFlow(runner, flow_type="TestAgent", options=REPORT)
    engine = LocalEngine(
        store,
        [flow],
        poll_interval=timedelta(milliseconds=20),
        retry_interval_scale=RETRY_INTERVAL_SCALE,
    )
    registered = engine.registered(flow)
    client = LocalFlowClient(engine)
    sessions = AgentSessionClient(client, flow)
    first = runner.worker = LocalWorker(engine)
    second = LocalWorker(engine)
    running = asyncio.create_task(first.run())
    serving: asyncio.Task[None] | None = None
    try:
        await sessions.start_session("s1", "call report {}")
        await asyncio.wait_for(running, 30)  # the third poll failed, and the worker stopped

        # The failure route is leased to a worker that stalls before it starts it.
        def stall(tx: StoreTransaction) -> None:
            row = _recorder(tx)
            assert row.status is ExecutionStatus.READY
            row.status, row.lease_owner = ExecutionStatus.RUNNING, "stalled"
            row.lease_expires_at = engine.now() + timedelta(hours=1)
            tx.update_execution(row)

        await engine.run(stall)
        assert await sessions.cancel_turn("s1", "turn-1")
        serving = asyncio.create_task(second.run())
        await asyncio.wait_for(runner.cancelling.wait(), 10)

        # While CancelToolTask waits for the runner, the stalled lease is handed back, in a
        # commit that hands the failure route to the running worker if it may run now.
        def hand_back(tx: StoreTransaction, owner: str, limit: int) -> tuple[None, handoff.HandOff]:
            row = _recorder(tx)
            row.status, row.lease_owner, row.lease_expires_at = ExecutionStatus.READY, None, None
            tx.update_execution(row)
            now = engine.now()
            return None, handoff.hand_off(
                tx, registered, "s1", owner, now, engine.lease_duration, limit
            )

        await second.commit_handing_off(hand_back)

        async def not_running() -> ExecutionStatus | None:
            status = (await engine.read(_recorder)).status
            return None if status is ExecutionStatus.RUNNING else status

        # Before, it ran beside CancelToolTask and recorded the call; now it waits for the lock.
        status: ExecutionStatus = await wait_until(
            "the failure route to finish or wait", not_running
        )
        assert status in (ExecutionStatus.READY, ExecutionStatus.COMPLETED)
        runner.release_cancel.set()

        async def ended() -> bool:
            return (await engine.read(_recorder)).status is ExecutionStatus.COMPLETED

        done: bool = await wait_until("the failure route to end", ended)
        assert done
        snapshot = await sessions.get_agent_snapshot("s1")
        assert snapshot.state is not None
        assert snapshot.state.cancelled_turn_id == "turn-1"
        finished = [
            event
            for event in await session_events(client, flow, "s1")
            if event.type == "tool_call_finished"
        ]
        assert len(finished) == 1
        runner.assert_task_abandoned()
    finally:
        runner.release_cancel.set()
        await first.stop()
        await second.stop()
        if serving is not None:
            await serving
        engine.close()
        store.close()
