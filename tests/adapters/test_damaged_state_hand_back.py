"""Where the Channel messages go that a Step failed by ``UnreadableStateError`` had taken.

A Step whose state cannot be read fails under its retry policy, as one that
raised. With no failure route the Flow fails, and the messages its wait took
are handed back to their Channel, kept in the file rather than lost with it. A
Step with a failure route is another case: its failure Step acts in its place
(the session's ``RecordToolFailure`` settles the call whose approval or answer
the wait took), so the messages are consumed with the failed execution, as on
Dex. Handed back, they waited for the next Step that waits on their Channel and
key, which took them as its own (in a session, a later call reusing the tool
call ID would take the failed call's approval).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.engine import (
    MapLoad,
    RetryPolicy,
    Rpc,
    RpcResult,
    Step,
    StepDecision,
    StepOptions,
    dead_end,
    go_to,
)
from dex_agents.ports.flow_rows import FlowStatus
from dex_agents.ports.persistence import AttributeDef, AttributeMapDef, ChannelDef
from dex_agents.ports.step_contexts import RpcContext, StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Wait
from tests.adapters.engine_flows import running_worker
from tests.support.flow_runs import channel_texts, wait_for_status

POLL = timedelta(milliseconds=20)
NOTES: AttributeMapDef[str] = AttributeMapDef("Notes", str)
GOT: AttributeDef[str] = AttributeDef("Got", str)
INBOX: ChannelDef[str] = ChannelDef("Inbox", str)
QUICK = RetryPolicy(
    maximum_attempts=2, initial_interval=timedelta(milliseconds=50), backoff_coefficient=1
)


class Takes(Step[None]):
    """Takes an ``Inbox`` message, then reads ``Notes`` (damaged by the test) to act on it."""

    failure_route: type[Step[Any]] | None = None

    def options(self) -> StepOptions:
        return StepOptions(retry=QUICK, loads=(MapLoad(NOTES),), failure_step=Takes.failure_route)

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        return Wait.until(ChannelCondition(INBOX))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        context.state.get_instance(NOTES, "n")
        return dead_end()


class Recovers(Step[None]):
    """The failure route: it reads nothing damaged and waits for the next message."""

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        return go_to(TakesNext)


class TakesNext(Step[None]):
    """Waits for the next ``Inbox`` message and keeps it as ``Got``."""

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        return Wait.until(ChannelCondition(INBOX))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        (message,) = context.wait_result.messages
        context.state.set(GOT, message)
        return dead_end()


def _send(context: RpcContext, text: str) -> RpcResult[bool]:
    context.state.publish(INBOX, text)
    return RpcResult(True)


class HandBackFlow:
    flow_type = "HandBack"
    schema: Sequence[Any] = (NOTES, GOT, INBOX)
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {"send": Rpc("send", str, bool, _send)}

    def __init__(self) -> None:
        self.start_step: Step[Any] = Takes()
        self.steps: Sequence[Step[Any]] = (self.start_step, Recovers(), TakesNext())


def _damage_notes(path: Path, flow_id: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(
            "INSERT INTO attribute_values VALUES (?, 'Notes', 'n', CAST(x'ff22' AS TEXT))",
            (flow_id,),
        )


@contextlib.asynccontextmanager
async def _failing_takes(
    tmp_path: Path, flow: HandBackFlow
) -> AsyncIterator[tuple[LocalEngine, LocalFlowClient]]:
    """Start ``f1``, let ``Takes`` wait, damage its ``Notes``, send ``first``: its wait takes
    ``first`` in the send's commit, and each attempt fails on the damaged value. The engine
    and its store are closed on the way out."""
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [flow], poll_interval=POLL)
    client = LocalFlowClient(engine)
    try:
        await client.start_flow(flow, "f1", None)
        async with running_worker(engine):

            async def waiting() -> bool:
                (row,) = await engine.read(lambda tx: tx.flow_executions("f1"))
                return row.status.value == "waiting"

            submitted: bool = await wait_until("Takes's wait", waiting)
            assert submitted
        _damage_notes(path, "f1")
        assert await client.invoke_rpc(flow, "f1", "send", "first")
        yield engine, client
    finally:
        engine.close()
        store.close()


async def test_a_step_with_a_failure_route_consumes_the_messages_it_took(
    tmp_path: Path,
) -> None:
    flow = HandBackFlow()
    Takes.failure_route = Recovers
    async with _failing_takes(tmp_path, flow) as (engine, client), running_worker(engine):

        async def next_started() -> bool:
            rows = await engine.read(lambda tx: tx.flow_executions("f1"))
            return any(
                row.step_type == "TakesNext"
                and row.status.value in ("waiting", "ready", "running", "completed")
                for row in rows
            )

        moved: bool = await wait_until("the failure route's next wait", next_started)
        assert moved
        # Before, 'first' was handed back and TakesNext took it as its own at once.
        assert await client.read_attribute("f1", GOT) is None
        assert await client.invoke_rpc(flow, "f1", "send", "second")

        async def got() -> bool:
            return await client.read_attribute("f1", GOT) is not None

        done: bool = await wait_until("TakesNext's message", got)
        assert done
        assert await client.read_attribute("f1", GOT) == "second"
    assert channel_texts(tmp_path / "flows.sqlite3", "f1", "Inbox") == []


async def test_a_step_without_a_failure_route_hands_its_messages_back(tmp_path: Path) -> None:
    flow = HandBackFlow()
    Takes.failure_route = None
    async with _failing_takes(tmp_path, flow) as (engine, client), running_worker(engine):
        await wait_for_status(client, "f1", FlowStatus.FAILED)
    assert channel_texts(tmp_path / "flows.sqlite3", "f1", "Inbox") == ['"first"']
