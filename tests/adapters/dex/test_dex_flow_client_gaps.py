"""What Dex SDK 1.23.0 cannot do: ``DexFlowClient`` says so with the way around."""

from __future__ import annotations

import pytest

from dex_agents.adapters.dex.errors import DexCapabilityUnavailableError
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.ports.errors import EngineError
from tests.adapters.dex.fake_async_client import FakeDexClient
from tests.adapters.dex.toy_agent_flow import STATUS


async def test_read_step_history_is_an_honest_gap(fake: FakeDexClient) -> None:
    with pytest.raises(DexCapabilityUnavailableError) as caught:
        await DexFlowClient(fake).read_step_history("s-1")
    assert str(caught.value) == (
        "read_step_history is not available on Dex: Dex SDK 1.23.0 has no client API for "
        "a Flow's history; read it with `dexcli flow history s-1` or in Dex Web"
    )
    assert isinstance(caught.value, NotImplementedError)
    assert fake.calls == []


async def test_read_attribute_is_an_honest_gap(fake: FakeDexClient) -> None:
    with pytest.raises(DexCapabilityUnavailableError) as caught:
        await DexFlowClient(fake).read_attribute("s-1", STATUS)
    assert str(caught.value) == (
        "read_attribute(status) is not available on Dex: Dex SDK 1.23.0 has no client API to "
        "read Attributes (get_attributes); read session state through the get_agent_snapshot "
        "RPC (AgentSessionClient.get_agent_snapshot) or `dexcli flow state s-1`"
    )
    assert isinstance(caught.value, EngineError)
    assert fake.calls == []
