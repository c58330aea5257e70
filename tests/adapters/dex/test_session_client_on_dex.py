"""``AgentSessionClient`` over a Dex ``AsyncClient``, as the spec's "Running an agent" builds it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import dex
import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.dex.errors import DexEngineError
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.app.session_flow import PortableSessionFlow
from tests.app.scripted_runner import ScriptedRunner


async def test_the_spec_example_builds_and_a_call_fails_clearly_without_a_server(
    tmp_path: Path,
) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    registry = dex.Registry([flow], allow_async_handlers=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / ".dex-cache"), 64 * 1024 * 1024))
    try:
        options = dex.ClientOptions(server_address="127.0.0.1:1")
        async with dex.AsyncClient(registry, cache, options) as client:
            sessions = AgentSessionClient(client, flow)
            with pytest.raises(DexEngineError) as caught:
                await asyncio.wait_for(
                    sessions.start_session("session-42", "Find my open tickets"), timeout=30
                )
            with pytest.raises(DexEngineError):
                await asyncio.wait_for(sessions.get_agent_snapshot("session-42"), timeout=30)
    finally:
        cache.close()
    assert caught.value.code == "UNAVAILABLE"


async def test_a_dex_client_needs_the_registered_dex_flow(tmp_path: Path) -> None:
    portable = PortableSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    registry = dex.Registry([flow], allow_async_handlers=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    try:
        async with dex.AsyncClient(registry, cache) as client:
            with pytest.raises(TypeError, match="needs the AgentSessionFlow registered"):
                AgentSessionClient(client, portable)
            sessions = AgentSessionClient(
                client, flow, start_options=dex.StartFlowOptions(timeout=None)
            )
            assert isinstance(sessions._client, DexFlowClient)
    finally:
        cache.close()


def test_start_options_are_dex_options_and_need_a_dex_client() -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    engine = LocalEngine(MemoryFlowStore(), [flow])
    try:
        with pytest.raises(TypeError, match="pass them with an AsyncClient"):
            AgentSessionClient(LocalFlowClient(engine), flow, start_options=dex.StartFlowOptions())
    finally:
        engine.close()
