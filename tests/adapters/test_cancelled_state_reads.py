"""An execute attempt cancelled while its worker reads its state again ends cancelled at once.

A claim that cannot read a session's state (a damaged value) leases the Step with no
snapshot, and the worker reads the state itself, once: that read fails too, and the
attempt fails under its retry policy (``test_damaged_state_attempts.py``). A
cancellation the store records meanwhile (an RPC's ``canceling_steps``), whether it
stops that read or finds the Step waiting for its next attempt, ends the Step
cancelled; leases here last an hour, so only the attempt's own record of its end, or
the RPC's, finishes the execution.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.engine import Rpc, RpcResult, Step, StepDecision, dead_end
from dex_agents.ports.flow_client import STEP_CANCELLED_EVENT
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.step_contexts import RpcContext, StepContext
from tests.adapters.engine_flows import LOG, running_worker

HOUR = timedelta(hours=1)
_CLAIMED = (ExecutionStatus.RUNNING, ExecutionStatus.READY)


class Reads(Step[None]):
    ran = False

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        Reads.ran = True
        return dead_end()


def _cancel(context: RpcContext, _: None) -> RpcResult[bool]:
    return RpcResult(True, canceling_steps=(Reads,))


class ReadsFlow:
    flow_type = "Reads"
    schema: Sequence[Any] = (LOG,)
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {"cancel": Rpc("cancel", type(None), bool, _cancel)}

    def __init__(self) -> None:
        self.start_step: Step[Any] = Reads()
        self.steps: Sequence[Step[Any]] = (self.start_step,)


async def test_an_attempt_cancelled_while_it_reads_its_state_again_ends_cancelled(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flows.sqlite3"
    flow = ReadsFlow()
    store = SqliteFlowStore(path)
    engine = LocalEngine(
        store, [flow], poll_interval=timedelta(milliseconds=20), lease_duration=HOUR
    )
    client = LocalFlowClient(engine)
    try:
        await client.start_flow(flow, "f1", None)
        # A value the file holds as bytes no text is: no read of the session's state works.
        with sqlite3.connect(path) as raw:
            raw.execute(
                "INSERT INTO attribute_values VALUES ('f1', ?, '', CAST(x'ff22' AS TEXT))",
                (LOG.name,),
            )
        raw.close()
        async with running_worker(engine):

            async def claimed() -> bool:
                (row,) = await engine.read(lambda tx: tx.flow_executions("f1"))
                return row.first_attempt_at is not None and row.status in _CLAIMED

            # Leased with no snapshot: the worker's task reads the state, and fails to. Its
            # one read is short, so the cancellation may find it failed, waiting to retry.
            taken: bool = await wait_until("the claim", claimed)
            assert taken
            assert await client.invoke_rpc(flow, "f1", "cancel", None)

            async def ended() -> list[tuple[str, str]] | None:
                history = await client.read_step_history("f1")
                return [(e.step_type, e.event_type) for e in history] or None

            # Before, a task stopped in its read recorded nothing: it stayed running,
            # leased, until the lease lapsed.
            history: list[tuple[str, str]] = await wait_until("the attempt's end", ended)
            assert history == [("Reads", STEP_CANCELLED_EVENT)]
        assert not Reads.ran
    finally:
        engine.close()
        store.close()
