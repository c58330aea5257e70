"""``DexFlowClient.stop_flow``: cancel with a reason; a closed session is left as it is."""

from __future__ import annotations

import dex
import pytest

from dex_agents.adapters.dex.errors import DexEngineError, DexFlowNotActiveOrNotFoundError
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.ports.errors import FlowNotFoundError
from tests.adapters.dex.fake_async_client import FakeDexClient, dex_info, not_found, unavailable


async def test_stop_flow_cancels_with_the_reason(fake: FakeDexClient) -> None:
    await DexFlowClient(fake).stop_flow("s-1", "user left")
    options = dex.StopFlowOptions(type=dex.StopType.CANCEL, reason="user left")
    assert fake.calls == [("stop_flow", "s-1", options)]


async def test_stopping_a_closed_session_does_nothing(fake: FakeDexClient) -> None:
    fake.refuse_as_closed_or_missing("stop_flow", dex_info(dex.FlowStatus.COMPLETED))
    await DexFlowClient(fake).stop_flow("s-1")
    assert [call[0] for call in fake.calls] == ["stop_flow", "describe_flow"]


@pytest.mark.parametrize(
    ("probe", "expected_type", "message"),
    [
        (not_found("describe_flow"), FlowNotFoundError, "no session with ID 's-1'"),
        (
            dex_info(dex.FlowStatus.RUNNING),
            DexFlowNotActiveOrNotFoundError,
            "session 's-1' is closed or does not exist: refused",
        ),
        (
            unavailable("describe_flow"),
            DexFlowNotActiveOrNotFoundError,
            "session 's-1' is closed or does not exist: refused",
        ),
    ],
    ids=["missing", "running", "probe failed"],
)
async def test_stop_flow_refusals(
    fake: FakeDexClient,
    probe: dex.FlowInfo | Exception,
    expected_type: type[Exception],
    message: str,
) -> None:
    fake.refuse_as_closed_or_missing("stop_flow", probe)
    with pytest.raises(expected_type) as caught:
        await DexFlowClient(fake).stop_flow("s-1")
    assert type(caught.value) is expected_type
    assert str(caught.value) == message


async def test_stop_flow_against_a_dead_server(fake: FakeDexClient) -> None:
    fake.failures["stop_flow"] = unavailable("stop_flow")
    with pytest.raises(DexEngineError) as caught:
        await DexFlowClient(fake).stop_flow("s-1")
    assert caught.value.retryable is True
