"""The session test harness: an in-process engine, a worker and a session client over a store.

Tests run the same session on the in-memory and the SQLite store (the ``store``
fixture), with a scripted runner, and poll snapshots with a deadline rather than
sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import DEFAULT_LEASE_DURATION, LocalEngine
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentStatus
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import DeferredToolExecution
from tests.app.scripted_runner import ScriptedRunner
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE
from tests.support.session_events import session_events

T = TypeVar("T")


async def until(
    sessions: AgentSessionClient,
    description: str,
    probe: Callable[[AgentSnapshot], T | None],
    session_id: str = "s1",
    *,
    seconds: float = 10.0,
) -> T:
    """Poll the snapshot until ``probe`` returns a value; fail the test after ``seconds``."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        snapshot = await sessions.get_agent_snapshot(session_id)
        found = probe(snapshot)
        if found is not None and found is not False:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {description}; last snapshot: {snapshot}")
        await asyncio.sleep(0.01)


async def idle(
    sessions: AgentSessionClient, session_id: str = "s1", turns: int = 1, *, seconds: float = 10.0
) -> AgentSnapshot:
    """Wait until ``turns`` turns have ended and the session waits for a message."""

    def waiting(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        if (
            state is not None
            and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
            and state.turn_count >= turns
        ):
            return snapshot
        return None

    return await until(sessions, f"{turns} turns to end", waiting, session_id, seconds=seconds)


@dataclass
class Session:
    runner: ScriptedRunner
    flow: AgentSessionFlow
    client: LocalFlowClient
    sessions: AgentSessionClient

    async def until(
        self, description: str, probe: Callable[[AgentSnapshot], T | None], session_id: str = "s1"
    ) -> T:
        """Poll the snapshot until ``probe`` returns a value."""
        return await until(self.sessions, description, probe, session_id)

    async def idle(self, session_id: str = "s1", turns: int = 1) -> AgentSnapshot:
        """Wait until ``turns`` turns have ended and the session waits for a message."""
        return await idle(self.sessions, session_id, turns)

    async def events(self, session_id: str = "s1") -> list[AgentEvent]:
        """Every event of the session's Stream so far."""
        return await session_events(self.client, self.flow, session_id)


@contextlib.asynccontextmanager
async def serving(
    store: FlowStore, flow: FlowDefinition, *, lease_duration: timedelta = DEFAULT_LEASE_DURATION
) -> AsyncIterator[LocalFlowClient]:
    """An engine on ``store`` serving ``flow`` with a worker on this loop; its client.

    Its retries wait ``RETRY_INTERVAL_SCALE`` of each policy's interval.

    The worker stops, and the engine and ``store`` close, on the way out.
    """
    engine = LocalEngine(
        store,
        [flow],
        poll_interval=timedelta(milliseconds=20),
        lease_duration=lease_duration,
        retry_interval_scale=RETRY_INTERVAL_SCALE,
    )
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())
    try:
        yield LocalFlowClient(engine)
    finally:
        await worker.stop()
        await task
        engine.close()
        store.close()


@contextlib.asynccontextmanager
async def session_stack(
    store: FlowStore,
    runner: ScriptedRunner,
    options: AgentSessionOptions | None = None,
    *,
    flow_class: type[AgentSessionFlow] = AgentSessionFlow,
    lease_duration: timedelta = DEFAULT_LEASE_DURATION,
) -> AsyncIterator[Session]:
    """An engine on ``store`` with a worker running a ``flow_class`` session Flow over ``runner``."""
    flow = flow_class(runner, flow_type="TestAgent", options=options)
    async with serving(store, flow, lease_duration=lease_duration) as client:
        yield Session(runner, flow, client, AgentSessionClient(client, flow))


async def echo(call: DeferredToolExecution) -> str:
    return f"looked up {call.tool_call.arguments}"
