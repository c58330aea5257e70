"""RPCs that race a turn's cancellation: an answer nobody would consume is refused."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.requests import AgentSnapshot
from tests.app.scripted_runner import ScriptedRunner


async def _snapshot_until(sessions: AgentSessionClient) -> AgentSnapshot:
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        snapshot = await sessions.get_agent_snapshot("s1")
        if snapshot.pending_interrupts:
            return snapshot
        assert asyncio.get_running_loop().time() < deadline, "no pending question"
        await asyncio.sleep(0.01)


async def test_answers_after_cancel_turn_are_refused_before_the_turn_ends() -> None:
    options = AgentSessionOptions(
        built_in_tools=frozenset({BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT})
    )
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="RaceAgent", options=options)
    store = MemoryFlowStore()
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    sessions = AgentSessionClient(LocalFlowClient(engine), flow)
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())
    try:
        await sessions.start_session("s1", 'call ask_user {"question": "Which account?"}')
        snapshot = await _snapshot_until(sessions)
        (question,) = snapshot.pending_interrupts
        # No worker runs between the cancellation and the answers, so the turn has
        # not ended yet: its question is still listed as pending.
        await worker.stop()
        await task
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is not None
        assert await sessions.cancel_turn("s1", snapshot.state.active_turn_id)
        assert not await sessions.answer_question("s1", question.interrupt_id, "savings")
        assert not await sessions.resolve_interrupt("s1", question.interrupt_id, approved=False)
    finally:
        if not task.done():
            await worker.stop()
            await task
        engine.close()
        store.close()
