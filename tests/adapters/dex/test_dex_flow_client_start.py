"""``DexFlowClient.start_flow`` and the options every session starts with.

The session options make sessions searchable by the Steps they wait in; ``start_flow``
sends the session's wire input and initial Attributes and maps Dex's refusals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import dex
import pytest

from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.dex.search import session_start_options
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.state import AgentSessionStartInput
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import Rpc, Step
from dex_agents.ports.errors import FlowAlreadyStartedError
from tests.adapters.dex.fake_async_client import FakeDexClient, dex_error
from tests.adapters.dex.toy_agent_flow import LAST_MESSAGE, STATUS, ToyFlow

WITH_WAIT_FOR = dex.ActiveStepSearchMode.WITH_WAIT_FOR
BASE = dex.StartFlowOptions(
    timeout=timedelta(hours=1),
    id_reuse_policy=dex.IdReusePolicy.ALLOW_IF_NOT_RUNNING,
    request_id="start-s-1",
    ignore_already_started=True,
)


@pytest.mark.parametrize(
    ("given", "mode", "expected"),
    [
        (None, WITH_WAIT_FOR, dex.StartFlowOptions(config_override=dex.FlowConfig(WITH_WAIT_FOR))),
        (
            BASE,
            WITH_WAIT_FOR,
            dataclasses.replace(BASE, config_override=dex.FlowConfig(WITH_WAIT_FOR)),
        ),
        (
            dex.StartFlowOptions(config_override=dex.FlowConfig(continue_as_new_threshold=1000)),
            WITH_WAIT_FOR,
            dex.StartFlowOptions(
                config_override=dex.FlowConfig(WITH_WAIT_FOR, continue_as_new_threshold=1000)
            ),
        ),
        (
            dex.StartFlowOptions(config_override=dex.FlowConfig(dex.ActiveStepSearchMode.DISABLED)),
            WITH_WAIT_FOR,
            dex.StartFlowOptions(config_override=dex.FlowConfig(dex.ActiveStepSearchMode.DISABLED)),
        ),
        (
            None,
            dex.ActiveStepSearchMode.ALL,
            dex.StartFlowOptions(config_override=dex.FlowConfig(dex.ActiveStepSearchMode.ALL)),
        ),
        (BASE, None, BASE),
        (None, None, dex.StartFlowOptions()),
    ],
    ids=[
        "defaults",
        "base options kept",
        "other config kept",
        "explicit mode wins",
        "another mode",
        "no mode",
        "nothing",
    ],
)
def test_session_start_options(
    given: dex.StartFlowOptions | None,
    mode: dex.ActiveStepSearchMode | None,
    expected: dex.StartFlowOptions,
) -> None:
    assert session_start_options(given, mode) == expected
    client = DexFlowClient(FakeDexClient(), active_step_search_mode=mode, start_options=given)
    assert client.start_options == expected


def test_sessions_start_searchable_by_default(fake: FakeDexClient) -> None:
    config = DexFlowClient(fake).start_options.config_override
    assert config is not None
    assert config.active_step_search_mode is WITH_WAIT_FOR


# --- start_flow ---------------------------------------------------------------


async def test_start_flow_sends_the_wire_input_and_the_session_options(
    fake: FakeDexClient, flow: ToyFlow
) -> None:
    client = DexFlowClient(fake)
    start = AgentSessionStartInput(initial_message="Refund order 7")
    assert await client.start_flow(flow, "s-1", start) == "run-1"
    assert fake.calls == [("start_flow", flow, "s-1", to_json(start), client.start_options)]


async def test_start_flow_writes_initial_attributes_in_their_wire_form(
    fake: FakeDexClient, flow: ToyFlow
) -> None:
    client = DexFlowClient(fake)
    message = AgentUserMessage(text="hello")
    await client.start_flow(
        flow,
        "s-1",
        AgentSessionStartInput(),
        initial_attributes={STATUS: "waiting", LAST_MESSAGE: message},
    )
    options = fake.calls[0][4]
    expected = client.start_options.with_attribute(
        flow.dex_schema.attribute(STATUS), "waiting"
    ).with_attribute(
        flow.dex_schema.attribute(LAST_MESSAGE),
        '{"images":[],"plan_mode":false,"text":"hello"}',
    )
    assert options == expected


async def test_start_flow_of_a_used_id_raises_flow_already_started(
    fake: FakeDexClient, flow: ToyFlow
) -> None:
    refusal = dex_error(
        dex.FlowAlreadyStartedError, "ALREADY_EXISTS", "FLOW_ALREADY_STARTED", "start_flow"
    )
    fake.failures["start_flow"] = refusal
    with pytest.raises(FlowAlreadyStartedError) as caught:
        await DexFlowClient(fake).start_flow(flow, "s-1", AgentSessionStartInput())
    assert str(caught.value) == "a session with ID 's-1' was already started"
    assert caught.value.__cause__ is refusal


@pytest.mark.parametrize("flow_id", ["", "a/b"])
async def test_start_flow_rejects_a_bad_session_id(
    fake: FakeDexClient, flow: ToyFlow, flow_id: str
) -> None:
    message = f"a session ID must be non-empty and contain no '/': {flow_id!r}"
    with pytest.raises(ValueError, match=f"^{message}$"):
        await DexFlowClient(fake).start_flow(flow, flow_id, AgentSessionStartInput())
    assert fake.calls == []


class UnboundFlow:
    """A port Flow definition with no Dex definitions."""

    flow_type = "Plain"
    start_step = None
    steps: Sequence[Step[Any]] = ()
    schema: Sequence[Any] = ()
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}


async def test_a_flow_not_bound_to_dex_is_refused(fake: FakeDexClient) -> None:
    with pytest.raises(TypeError, match=r"^Flow type Plain is not bound to Dex"):
        await DexFlowClient(fake).start_flow(UnboundFlow(), "s-1", None)
