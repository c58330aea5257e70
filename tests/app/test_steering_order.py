"""One sender's steers start turns in the order they were sent, on the embedded engine.

Between a steered turn's end and the start of the turn of its steered messages no
turn is active, and a running worker keeps the session there for a few
milliseconds only. A session whose first Step has not run yet is in the same
state once a queued message is steered: the test holds it there, with no worker,
while the RPCs commit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.domain.state import AgentStatus
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext
from tests.app.harness import until
from tests.app.scripted_runner import ScriptedRunner


@dataclass
class HoldingRunner(ScriptedRunner):
    """Holds the first model call of ``held_turn`` until ``release`` is set."""

    held_turn: str = "turn-2"
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.turn_id == self.held_turn and not self.entered.is_set():
            self.entered.set()
            await self.release.wait()
        return await super().run_model_step(turn)


@dataclass
class StoppableWorker:
    """An engine on a store whose worker a test stops and starts again."""

    engine: LocalEngine
    worker: LocalWorker | None = None
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.worker = LocalWorker(self.engine)
        self.task = asyncio.create_task(self.worker.run())

    async def stop(self) -> None:
        if self.worker is not None and self.task is not None:
            await self.worker.stop()
            await self.task
            self.worker = self.task = None


@contextlib.asynccontextmanager
async def serving(
    store: FlowStore, flow: AgentSessionFlow
) -> AsyncIterator[tuple[StoppableWorker, AgentSessionClient]]:
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    running = StoppableWorker(engine)
    try:
        yield running, AgentSessionClient(LocalFlowClient(engine), flow)
    finally:
        await running.stop()
        engine.close()
        store.close()


def settled(turns: int) -> Callable[[AgentSnapshot], AgentSnapshot | None]:
    """A probe for a session that waits with ``turns`` turns ended and nothing queued or steered."""

    def probe(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        if (
            state is not None
            and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
            and state.turn_count >= turns
            and not snapshot.queued_messages
            and not snapshot.steered_messages
        ):
            return snapshot
        return None

    return probe


async def test_a_steer_while_steered_messages_wait_for_their_turn_keeps_its_place(
    store: FlowStore,
) -> None:
    # Before, the steer with text in the window was queued: the next turn started with
    # the steered message alone, a later steer steered that turn, and the queued steer
    # came last. The user saw "queued", "third", "second".
    runner = HoldingRunner()
    flow = AgentSessionFlow(runner, flow_type="OrderAgent")
    async with serving(store, flow) as (running, sessions):
        await sessions.start_session("s1", "start")
        assert await sessions.send_user_message("s1", "queued")
        (queued,) = (await sessions.get_agent_snapshot("s1")).queued_messages
        # No turn is active, and the moved message waits to start the next one.
        assert await sessions.steer_user_message("s1", message_id=queued.message_id)
        assert await sessions.steer_user_message("s1", text="second")
        snapshot = await sessions.get_agent_snapshot("s1")
        assert [m.text for m in snapshot.steered_messages] == ["queued", "second"]
        assert snapshot.queued_messages == ()
        running.start()
        await asyncio.wait_for(runner.entered.wait(), 10)
        assert await sessions.steer_user_message("s1", text="third")
        runner.release.set()
        snapshot = await until(sessions, "every steer to be answered", settled(3))
        users = [m.text for m in snapshot.messages if m.role is MessageRole.USER]
        assert users == ["start", "queued", "second", "third"]
        assert snapshot.state is not None
        assert snapshot.state.turn_count == 3
