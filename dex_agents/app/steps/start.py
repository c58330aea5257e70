"""``StartAgentSession`` and ``AwaitUserMessage``: where a session begins and where it waits."""

from __future__ import annotations

from typing import Any

from dex_agents.app.message_store import WINDOW_LOAD
from dex_agents.app.session import SessionRuntime, build_user_message, require_state, start_turn
from dex_agents.app.steps import run_model
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.plans import new_turn_interaction_mode
from dex_agents.domain.session_settings import start_session_settings_failure
from dex_agents.domain.state import AgentSessionStartInput, AgentState, AgentStatus
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.engine import (
    AttributeLock,
    ChannelCondition,
    Step,
    StepContext,
    StepDecision,
    StepDurability,
    StepOptions,
    Wait,
    WaitContext,
    fail,
    go_to,
)
from dex_agents.ports.session_schema import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_USAGE,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    TURN_CANCELLATION_REQUEST,
)


class StartAgentSession(Step[AgentSessionStartInput]):
    """The start Step: initializes state, usage, interrupts and ``SessionSettings``."""

    input_type = AgentSessionStartInput

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(loads=(WINDOW_LOAD,), durability=StepDurability.SYNC)

    async def execute(self, context: StepContext, input: AgentSessionStartInput) -> StepDecision:
        failure = start_session_settings_failure(input.session_settings)
        if failure is not None:
            # Invalid settings fail the session at once, with no retry.
            return fail(failure)
        state = context.state
        agent_state = AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE)
        state.set(AGENT_USAGE, AgentUsage())
        state.set(PENDING_INTERRUPTS, ())
        if input.session_settings is not None:
            state.set(SESSION_SETTINGS, dict(input.session_settings))
        state.set(AGENT_STATE, agent_state)
        if not input.initial_message.strip():
            return go_to(AwaitUserMessage)
        message = AgentUserMessage(
            text=input.initial_message, plan_mode=input.plan_mode, images=input.images
        )
        mode = new_turn_interaction_mode([message], state.get(AGENT_PLAN))
        framework_message = build_user_message(self.runtime, message.text, message.images)
        start_turn(context, self.runtime, agent_state, [framework_message], mode)
        return go_to(run_model.RunModel)


class AwaitUserMessage(Step[None]):
    """Waits for the next user message and starts a turn with it."""

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(
            loads=(WINDOW_LOAD,),
            locks=(AttributeLock(TURN_CANCELLATION_REQUEST),),
            durability=StepDurability.SYNC,
        )

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        return Wait.any_of(ChannelCondition(QUEUED_USER_MESSAGES))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        result = context.wait_result
        messages: list[Any] = list(result.messages)
        state = context.state
        agent_state = require_state(state)
        (message,) = messages
        assert isinstance(message, AgentUserMessage)
        mode = new_turn_interaction_mode([message], state.get(AGENT_PLAN))
        framework_message = build_user_message(self.runtime, message.text, message.images)
        start_turn(context, self.runtime, agent_state, [framework_message], mode)
        return go_to(run_model.RunModel)
