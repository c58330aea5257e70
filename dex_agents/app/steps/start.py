"""``StartAgentSession`` and ``AwaitUserMessage``: where a session begins and where it waits."""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents.app.message_store import WINDOW_LOAD
from dex_agents.app.session import SessionRuntime, build_user_message, require_state, start_turn
from dex_agents.app.session_events import commit_event
from dex_agents.app.steps import run_model, turn_control
from dex_agents.domain.events import (
    AgentEventType,
    PlanExecutionStartedPayload,
    PlanUpdatedPayload,
)
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.plans import (
    PlanExecutionRequest,
    awaited_plan_execution_key,
    executing_turn_user_message,
    is_current_plan_approval,
    mark_plan_approved,
    new_turn_interaction_mode,
)
from dex_agents.domain.session_settings import start_session_settings_failure
from dex_agents.domain.state import (
    AgentSessionStartInput,
    AgentState,
    AgentStatus,
    InteractionMode,
    TurnControlRequest,
)
from dex_agents.domain.turns import turn_id as make_turn_id
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.engine import (
    AttributeLock,
    Step,
    StepDecision,
    StepDurability,
    StepOptions,
    fail,
    go_to,
)
from dex_agents.ports.session_schema import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_USAGE,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    PLAN_EXECUTIONS,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents.ports.step_contexts import StepContext, WaitContext
from dex_agents.ports.step_waits import Wait, for_one, for_one_in


def start_user_turn(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    messages: Sequence[AgentUserMessage],
) -> StepDecision:
    """Start a turn with the user's ``messages`` and move to ``RunModel``.

    The turn chats or plans as ``new_turn_interaction_mode`` decides from the
    messages and the stored plan; an approved plan's ``executing`` turn starts elsewhere.
    """
    mode = new_turn_interaction_mode(
        messages,
        context.state.get(AGENT_PLAN),
        plan_mode_enabled=runtime.options.plan_mode_enabled,
    )
    framework_messages = [
        build_user_message(runtime, message.text, message.images) for message in messages
    ]
    start_turn(context, runtime, agent_state, framework_messages, mode)
    return run_model.go_to_run_model(context.state, runtime)


class StartAgentSession(Step[AgentSessionStartInput]):
    """The start Step: initializes state, usage, interrupts and ``SessionSettings``."""

    input_type = AgentSessionStartInput
    # It stages the session's first state (and the first turn's message); nothing else.
    state_only = True

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
        return start_user_turn(context, self.runtime, agent_state, [message])


class AwaitUserMessage(Step[None]):
    """Waits for a steer wake, the next user message, or the approval of the current plan.

    A steer wake moves to ``ApplyTurnControl``; a message starts a ``chat`` or
    ``planning`` turn; an approval marks the plan ``active`` and starts an
    ``executing`` turn. A stale approval waits again.
    """

    # Starting a turn stages the user's message and the turn's state; the model call is
    # the next Step's.
    state_only = True

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(
            loads=(WINDOW_LOAD,),
            # No turn starts while cancel_turn or execute_plan decides.
            locks=(
                AttributeLock(TURN_CANCELLATION_REQUEST),
                AttributeLock(PENDING_PLAN_EXECUTION),
            ),
            durability=StepDurability.SYNC,
        )

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        conditions = [for_one(TURN_CONTROL_REQUESTS), for_one(QUEUED_USER_MESSAGES)]
        key = awaited_plan_execution_key(context.state.get(AGENT_PLAN))
        if key is not None:
            conditions.append(for_one_in(PLAN_EXECUTIONS, key))
        return Wait.any_of(*conditions)

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        (message,) = context.wait_result.messages
        if isinstance(message, TurnControlRequest):
            return go_to(turn_control.ApplyTurnControl)
        if isinstance(message, PlanExecutionRequest):
            return self._execute_plan(context, message)
        assert isinstance(message, AgentUserMessage)
        agent_state = require_state(context.state)
        return start_user_turn(context, self.runtime, agent_state, [message])

    def _execute_plan(self, context: StepContext, request: PlanExecutionRequest) -> StepDecision:
        runtime, state = self.runtime, context.state
        plan = state.get(AGENT_PLAN)
        if plan is None or not is_current_plan_approval(plan, request):
            pending = state.get(PENDING_PLAN_EXECUTION)
            if pending is not None and pending.revision == request.revision:
                state.delete(PENDING_PLAN_EXECUTION)
            return go_to(AwaitUserMessage)
        state.delete(PENDING_PLAN_EXECUTION)
        agent_state = require_state(state)
        turn = make_turn_id(agent_state.turn_count + 1)
        approved = mark_plan_approved(plan)
        state.set(AGENT_PLAN, approved)
        if approved.status is not plan.status:
            commit_event(
                context,
                runtime.stream,
                turn,
                AgentEventType.PLAN_UPDATED,
                PlanUpdatedPayload(
                    revision=approved.revision,
                    status=approved.status,
                    task_count=len(approved.todos),
                ),
            )
        commit_event(
            context,
            runtime.stream,
            turn,
            AgentEventType.PLAN_EXECUTION_STARTED,
            PlanExecutionStartedPayload(revision=approved.revision),
        )
        text = executing_turn_user_message(approved.revision)
        framework_message = build_user_message(runtime, text, ())
        start_turn(context, runtime, agent_state, [framework_message], InteractionMode.EXECUTING)
        return run_model.go_to_run_model(context.state, runtime)
