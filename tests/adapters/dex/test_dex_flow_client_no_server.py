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
