"""The README's five-minute tour runs as written."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.worker import LocalWorker

README = Path(__file__).resolve().parents[1] / "README.md"


def tour_code() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Defining an agent in five minutes") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


async def test_the_tour_defines_an_agent_that_answers() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(tour_code(), "README.md", "exec"), namespace)
    flow = namespace["flow"]
    assert isinstance(flow, AgentSessionFlow)
    store = MemoryFlowStore()
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    sessions = AgentSessionClient(LocalFlowClient(engine), flow)
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())
    try:
        await sessions.start_session("session-42", "Find my order")
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            snapshot = await sessions.get_agent_snapshot("session-42")
            if (
                snapshot.state is not None
                and snapshot.state.turn_count == 1
                and (snapshot.state.active_turn_id is None)
            ):
                break
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        assert snapshot.messages[-1].text == "Demo reply: Find my order"
    finally:
        await worker.stop()
        await task
        engine.close()
        store.close()
