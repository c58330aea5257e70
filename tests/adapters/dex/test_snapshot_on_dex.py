"""``get_agent_snapshot`` run by a real Dex ``AsyncWorker``: the attention rules the embedded
engine's tests pin hold for the state Dex hands the handler.

What it says about a session the embedded engine's tests (``tests/app``) check
with staged state; here the same handler reads the Attributes and loaded
Channel messages of a Dex RPC request (the fake-server driver), so a rule that
reads state Dex does not send, or reads it as Dex does not carry it, fails here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import attrs
import dex
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.dex.wire_values import to_dex
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.plans import PlanExecutionRequest
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.wire import from_json
from dex_agents.ports.persistence import AttributeDef
from dex_agents.ports.session_schema import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGES,
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
)
from tests.adapters.dex.contract_forms import fixed_clock
from tests.adapters.dex.fake_dex import DexWorkerDriver, running_worker
from tests.app.scripted_runner import ScriptedRunner
from tests.app.turn_control_fakes import ACTIVE, DRAFT, IDLE, NOW, WAITING_INTERRUPT

FLOW_TYPE = "TriageAgent"


@pytest.fixture
def flow() -> AgentSessionFlow:
    return AgentSessionFlow(ScriptedRunner(), flow_type=FLOW_TYPE)


@pytest.fixture
async def driver(flow: AgentSessionFlow) -> AsyncIterator[DexWorkerDriver]:
    async with running_worker(dex.Registry([flow], allow_async_handlers=True)) as worker:
        yield worker


def attributes(values: dict[AttributeDef[Any], Any]) -> dict[str, Any]:
    return {
        attribute.name: to_dex(attribute.value_type, value) for attribute, value in values.items()
    }


async def snapshot(
    driver: DexWorkerDriver,
    values: dict[AttributeDef[Any], Any],
    pending: Mapping[str | tuple[str, str], Sequence[tuple[str, object]]] | None = None,
) -> AgentSnapshot:
    # Dex loads the maps and Channels the RPC declares, empty or not.
    maps = (AGENT_MESSAGES.name, AGENT_MESSAGE_CHUNKS.name, AGENT_TOOL_CALLS.name)
    channels: dict[str | tuple[str, str], Sequence[tuple[str, object]]] = {
        QUEUED_USER_MESSAGES.name: [],
        STEERED_USER_MESSAGES.name: [],
        **(pending or {}),
    }
    outcome = await driver.rpc(
        FLOW_TYPE,
        "get_agent_snapshot",
        None,
        attributes=attributes(values),
        loaded_attribute_maps=maps,
        pending_channel_messages=channels,
    )
    assert outcome.error is None, outcome.error
    return from_json(outcome.output, AgentSnapshot)


async def test_messages_sent_before_the_session_starts_are_in_its_snapshot(
    driver: DexWorkerDriver,
) -> None:
    queued = AgentUserMessage(text="queued")
    steered = AgentUserMessage(text="steered")
    found = await snapshot(
        driver,
        {},
        {
            QUEUED_USER_MESSAGES.name: [("q-1", to_dex(AgentUserMessage, queued))],
            STEERED_USER_MESSAGES.name: [("s-1", to_dex(AgentUserMessage, steered))],
        },
    )
    assert found.state is None
    assert found.queued_message_count == 1
    assert [(m.message_id, m.text) for m in found.queued_messages] == [("q-1", "queued")]
    assert [(m.message_id, m.text) for m in found.steered_messages] == [("s-1", "steered")]


async def test_an_interrupt_past_its_deadline_asks_no_person(
    flow: AgentSessionFlow, driver: DexWorkerDriver
) -> None:
    flow.dex_binding.clock = fixed_clock(NOW)
    expired = attrs.evolve(WAITING_INTERRUPT, deadline=NOW)
    later = attrs.evolve(
        WAITING_INTERRUPT, interrupt_id="b", tool_call_id="b", deadline=NOW + timedelta(seconds=1)
    )
    found = await snapshot(driver, {AGENT_STATE: ACTIVE, PENDING_INTERRUPTS: (expired, later)})
    assert found.pending_interrupts == (later,)
    found = await snapshot(driver, {AGENT_STATE: ACTIVE, PENDING_INTERRUPTS: (expired,)})
    assert found.pending_interrupts == ()
    assert session_attention(found) is None


async def test_an_accepted_plan_approval_keeps_the_session_busy_until_its_turn_starts(
    driver: DexWorkerDriver,
) -> None:
    approval = PlanExecutionRequest(revision=3)
    found = await snapshot(
        driver, {AGENT_STATE: IDLE, AGENT_PLAN: DRAFT, PENDING_PLAN_EXECUTION: approval}
    )
    assert found.pending_plan_execution == approval
    assert session_attention(found) is None
    replaced = attrs.evolve(DRAFT, revision=4)
    found = await snapshot(
        driver, {AGENT_STATE: IDLE, AGENT_PLAN: replaced, PENDING_PLAN_EXECUTION: approval}
    )
    assert found.pending_plan_execution is None
    assert session_attention(found) is SessionAttention.IDLE
