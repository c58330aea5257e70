"""The chat shows a model's text while the model still writes it, and only once."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.cli.main import _Follower, _LiveText, _Stack
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, TurnCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.runner import AgentTurnContext
from tests.app.scripted_runner import ScriptedRunner


class HeldModel(ScriptedRunner):
    """Writes its answer as live text, then holds the model call until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        turn.events.write_text_delta("thinking about order 7")
        await self.release.wait()
        answer = FrameworkMessage(
            role=MessageRole.ASSISTANT, framework_item="{}", text="thinking about order 7"
        )
        return TurnCompleted(new_messages=[answer], usage=AgentUsage(model_calls=1))


async def test_live_text_is_shown_before_the_turn_ends_and_not_again_after(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runner = HeldModel()
    flow = AgentSessionFlow(runner, flow_type="LiveAgent")
    store = MemoryFlowStore()
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    flow_client = LocalFlowClient(engine)
    client = AgentSessionClient(flow_client, flow)
    worker = LocalWorker(engine)
    worker_task = asyncio.create_task(worker.run())
    live = _LiveText(_Stack(client, flow_client, flow, worker), "s1")
    try:
        await client.start_session("s1")
        await live.start()
        follower = _Follower(client, "s1", live)
        follower.mark_seen(await client.get_agent_snapshot("s1"))
        assert await client.send_user_message("s1", "where is order 7")
        following = asyncio.create_task(follower.follow(0))
        deadline = asyncio.get_running_loop().time() + 10
        shown = ""
        while "agent> thinking about order 7" not in shown:
            assert asyncio.get_running_loop().time() < deadline, shown
            await asyncio.sleep(0.02)
            shown += capsys.readouterr().out
        # The model call is still held: the text came from the Stream, not the transcript.
        assert not following.done()
        runner.release.set()
        assert await asyncio.wait_for(following, 10)
        shown += capsys.readouterr().out
        assert shown.count("thinking about order 7") == 1
    finally:
        runner.release.set()
        await live.stop()
        await worker.stop()
        await worker_task
        engine.close()
        store.close()
