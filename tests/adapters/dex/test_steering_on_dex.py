"""``steer_user_message`` run by a real Dex ``AsyncWorker``: the steered messages Dex loads for it
decide where steered text goes, as the embedded engine's tests (``tests/app``) pin with staged
state."""

from __future__ import annotations

from collections.abc import AsyncIterator

import dex
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.dex.wire_values import from_dex, to_dex
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.requests import SteerUserMessageRequest
from dex_agents.domain.state import AgentState
from dex_agents.ports.session_schema import (
    AGENT_STATE,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CONTROL_REQUESTS,
)
from tests.adapters.dex.fake_dex import DexWorkerDriver, running_worker
from tests.app.scripted_runner import ScriptedRunner
from tests.app.turn_control_fakes import ACTIVE, IDLE

FLOW_TYPE = "TriageAgent"


@pytest.fixture
async def driver() -> AsyncIterator[DexWorkerDriver]:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type=FLOW_TYPE)
    async with running_worker(dex.Registry([flow], allow_async_handlers=True)) as worker:
        yield worker


@pytest.mark.parametrize(
    ("case", "agent_state", "steered", "channels"),
    [
        ("idle", IDLE, [], [QUEUED_USER_MESSAGES.name]),
        (
            "steered messages wait for their turn",
            IDLE,
            [AgentUserMessage(text="first")],
            [STEERED_USER_MESSAGES.name, TURN_CONTROL_REQUESTS.name],
        ),
        ("a running turn", ACTIVE, [], [STEERED_USER_MESSAGES.name, TURN_CONTROL_REQUESTS.name]),
    ],
)
async def test_steered_text_is_queued_only_while_nothing_waits_to_start_a_turn(
    driver: DexWorkerDriver,
    case: str,
    agent_state: AgentState,
    steered: list[AgentUserMessage],
    channels: list[str],
) -> None:
    outcome = await driver.rpc(
        FLOW_TYPE,
        "steer_user_message",
        to_dex(SteerUserMessageRequest, SteerUserMessageRequest(text="second")),
        attributes={AGENT_STATE.name: to_dex(AgentState, agent_state)},
        # Dex loads the Channels the RPC declares, empty or not.
        pending_channel_messages={
            QUEUED_USER_MESSAGES.name: [],
            STEERED_USER_MESSAGES.name: [
                (f"s-{index}", to_dex(AgentUserMessage, message))
                for index, message in enumerate(steered)
            ],
        },
    )
    assert outcome.error is None, outcome.error
    assert outcome.output is True, case
    assert [channel for channel, _, _ in outcome.channel_publishes] == channels, case
    _, _, value = outcome.channel_publishes[0]
    assert from_dex(AgentUserMessage, value) == AgentUserMessage(text="second"), case
