"""``DexFlowClient.describe_flow`` and ``list_flows``: Dex's Flow info as the port's."""

from __future__ import annotations

from datetime import datetime, timedelta

import dex
import pytest

from dex_agents.adapters.dex.errors import DexEngineError
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.dex.flow_statuses import port_flow_status
from dex_agents.ports.errors import FlowNotFoundError
from dex_agents.ports.flow_client import FlowInfo
from tests.adapters.dex.fake_async_client import T0, FakeDexClient, dex_info, not_found, unavailable
from tests.adapters.dex.toy_agent_flow import FLOW_TYPE


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (dex.FlowStatus.RUNNING, "running"),
        (dex.FlowStatus.CONTINUED_AS_NEW, "running"),
        (dex.FlowStatus.COMPLETED, "completed"),
        (dex.FlowStatus.FAILED, "failed"),
        (dex.FlowStatus.SERVER_SIDE_TIMEOUT_INTERNAL_ONLY, "failed"),
        (dex.FlowStatus.CANCELED, "stopped"),
        (dex.FlowStatus.TERMINATED, "stopped"),
    ],
)
async def test_describe_flow_maps_the_status(
    fake: FakeDexClient, status: dex.FlowStatus, text: str
) -> None:
    assert port_flow_status(status) == text
    fake.info = dex_info(status)
    info = await DexFlowClient(fake).describe_flow("s-1")
    assert info == FlowInfo(
        flow_id="s-1",
        flow_type=FLOW_TYPE,
        status=text,
        started_at=T0,
        closed_at=None,
        active_step_types=(),
    )


def test_every_dex_status_has_a_port_status() -> None:
    assert {port_flow_status(status) for status in dex.FlowStatus} == {
        "running",
        "completed",
        "failed",
        "stopped",
    }


async def test_describe_flow_of_a_missing_session(fake: FakeDexClient) -> None:
    fake.failures["describe_flow"] = not_found("describe_flow")
    with pytest.raises(FlowNotFoundError, match=r"^no session with ID 's-1'$"):
        await DexFlowClient(fake).describe_flow("s-1")


def _entry(flow_id: str, started_at: datetime, closed_at: datetime | None) -> dex.SearchFlowEntry:
    status = dex.FlowStatus.RUNNING if closed_at is None else dex.FlowStatus.CANCELED
    return dex.SearchFlowEntry(
        flow_id, f"run-{flow_id}", FLOW_TYPE, status, started_at, closed_at, {}
    )


async def test_list_flows_pages_through_the_search_oldest_first(fake: FakeDexClient) -> None:
    closed = T0 + timedelta(hours=3)
    fake.pages = {
        "": dex.SearchFlowsPage(
            [_entry("s-3", T0 + timedelta(hours=2), None), _entry("s-2", T0, closed)], "p2"
        ),
        "p2": dex.SearchFlowsPage([_entry("s-1", T0, None)], ""),
    }
    flows = await DexFlowClient(fake).list_flows(FLOW_TYPE)
    assert [(info.flow_id, info.status, info.closed_at) for info in flows] == [
        ("s-1", "running", None),
        ("s-2", "stopped", closed),
        ("s-3", "running", None),
    ]
    assert all(info.active_step_types == () for info in flows)
    assert fake.calls == [
        ("search_flows", 'FlowType = "ToyAgent"', 50, ""),
        ("search_flows", 'FlowType = "ToyAgent"', 50, "p2"),
    ]


async def test_list_flows_needs_a_flow_type(fake: FakeDexClient) -> None:
    with pytest.raises(ValueError, match=r"^DexFlowClient\.list_flows needs a flow_type"):
        await DexFlowClient(fake).list_flows()
    assert fake.calls == []


async def test_list_flows_against_a_dead_server(fake: FakeDexClient) -> None:
    fake.failures["search_flows"] = unavailable("search_flows")
    with pytest.raises(DexEngineError, match=r"^Dex search_flows failed \(UNAVAILABLE\)"):
        await DexFlowClient(fake).list_flows(FLOW_TYPE)
