"""A real ``dex.AsyncClient`` pointed at no server.

``DexFlowClient`` is built over it without contacting anything, and each call fails
as a retryable port error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import dex
import pytest

from dex_agents.adapters.dex.errors import DexEngineError
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.dex.sync_flow_client import DexSyncFlowClient
from dex_agents.ports.errors import FlowDefinitionError
from tests.adapters.dex.toy_agent_flow import FLOW_TYPE, ToyFlow

Call = Callable[[DexFlowClient, ToyFlow], Awaitable[object]]

REAL_CALLS: dict[str, tuple[str, Call]] = {
    "describe_flow": ("describe_flow", lambda client, _: client.describe_flow("s-1")),
    "invoke_rpc": (
        "invoke_rpc",
        lambda client, flow: client.invoke_rpc(flow, "s-1", "count", None),
    ),
    "list_flows": ("search_flows", lambda client, _: client.list_flows(FLOW_TYPE)),
}


@pytest.mark.parametrize("name", sorted(REAL_CALLS))
async def test_a_real_client_without_a_server_fails_as_a_retryable_engine_error(
    tmp_path: Path, name: str
) -> None:
    operation, call = REAL_CALLS[name]
    flow = ToyFlow()
    registry = dex.Registry([flow])
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    try:
        options = dex.ClientOptions(server_address="127.0.0.1:1")
        async with dex.AsyncClient(registry, cache, options) as real:
            client = DexFlowClient(real)  # builds a lazy channel: contacts nothing
            with pytest.raises(DexEngineError) as caught:
                await asyncio.wait_for(call(client, flow), timeout=30)
    finally:
        cache.close()
    assert caught.value.code == "UNAVAILABLE"
    assert caught.value.operation == operation
    assert caught.value.retryable is True
    assert isinstance(caught.value.__cause__, dex.DexServiceError)


async def test_a_flow_the_client_registry_does_not_hold_is_refused_as_a_flow_definition_error(
    tmp_path: Path,
) -> None:
    registered, other = ToyFlow(), ToyFlow()
    registry = dex.Registry([registered])
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    refused: dict[str, BaseException] = {}
    try:
        options = dex.ClientOptions(server_address="127.0.0.1:1")
        async with dex.AsyncClient(registry, cache, options) as real:
            client = DexFlowClient(real)
            calls: dict[str, Callable[[], Awaitable[object]]] = {
                "start_flow": lambda: client.start_flow(other, "s-1", None),
                "invoke_rpc": lambda: client.invoke_rpc(other, "s-1", "count", None),
                "read_stream": lambda: client.read_stream(other, "s-1"),
            }
            for name, call in calls.items():
                with pytest.raises(FlowDefinitionError) as caught:
                    await asyncio.wait_for(call(), timeout=30)
                refused[name] = caught.value
        with dex.Client(registry, cache, options) as sync_real:
            with pytest.raises(FlowDefinitionError) as caught:
                DexSyncFlowClient(sync_real).read_stream(other, "s-1")
            refused["sync read_stream"] = caught.value
    finally:
        cache.close()
    assert str(refused["read_stream"]) == "Stream is not registered: events"
    for error in refused.values():
        assert isinstance(error.__cause__, dex.FlowDefinitionError)
