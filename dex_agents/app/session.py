"""What every session Step shares: the runner, the options, and the turn's lifecycle.

The domain decides each rule; these helpers read what a rule needs from the
Step's transaction and stage what it returns, so each Step stays a short
sequence of load, decide, commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import attrs

from dex_agents.app.message_store import store_messages
from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.runner_capabilities import RunnerCapabilities
from dex_agents.app.session_events import commit_event
from dex_agents.app.tracing import TracerSlot, start_activation
from dex_agents.domain.events import (
    AgentEvent,
    AgentEventType,
    TurnCompletedPayload,
    TurnFailedPayload,
    TurnStartedPayload,
    UsageRecordedPayload,
)
from dex_agents.domain.images import (
    AgentImageReference,
    require_images_of_store,
    validate_image_references,
)
from dex_agents.domain.messages import AgentMessage, AgentUserMessage, FrameworkMessage
from dex_agents.domain.runner_outcome_checks import (
    check_user_message,
)
from dex_agents.domain.session_settings import copy_settings_for_turn
from dex_agents.domain.state import AgentState, AgentStatus, InteractionMode, TurnReplySequence
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.turns import turn_id as make_turn_id
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.windowing import MessageStorageOptions, message_sequence_key
from dex_agents.ports.persistence import StateReader, StateTransaction, StreamDef
from dex_agents.ports.runner import (
    AgentFrameworkRunner,
    ImageStoreRunner,
    ImageUserMessageBuilder,
)
from dex_agents.ports.session_schema import (
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
    SESSION_SETTINGS,
    TURN_REPLY_SEQUENCE,
    TURN_SESSION_SETTINGS,
)
from dex_agents.ports.step_contexts import StepContext


@dataclass(frozen=True)
class SessionRuntime:
    """What the Steps of one ``AgentSessionFlow`` share."""

    runner: AgentFrameworkRunner[Any]
    options: AgentSessionOptions
    stream: StreamDef[AgentEvent]
    flow_type: str
    tracing: TracerSlot = field(default_factory=TracerSlot)
    capabilities: RunnerCapabilities = field(init=False)
    """The optional ports ``runner`` implements, checked once (``RunnerCapabilities``)."""
    message_storage: MessageStorageOptions = field(init=False)
    """``options.message_storage()``, built once: a tool turn stores messages three times,
    and each build checks every field again (about 16 K instructions)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "capabilities", RunnerCapabilities.of(self.runner))
        object.__setattr__(self, "message_storage", self.options.message_storage())


class SessionStateError(RuntimeError):
    """The session's stored state is not what a Step needs (a bug, or state from another version)."""


def require_state(state: StateReader) -> AgentState:
    """The ``AgentState``; a Step of a started session always has one."""
    agent_state = state.get(AGENT_STATE)
    if agent_state is None:
        raise SessionStateError("the session has no AgentState; StartAgentSession never committed")
    return agent_state


def turn_records(state: StateReader) -> dict[str, AgentToolCall]:
    """Every ``AgentToolCalls`` record the Step loaded, by tool call ID."""
    return dict(state.instances(AGENT_TOOL_CALLS))


def user_message_refusal(
    runtime: SessionRuntime, *, plan_mode: bool, images: Sequence[AgentImageReference]
) -> str | None:
    """Why this Flow cannot take a user message with ``plan_mode`` and ``images``; ``None``
    when it can.

    ``send_user_message`` and ``steer_user_message`` return ``False`` for such a
    message, and ``start_session`` raises ``ValueError`` with the reason.
    """
    if plan_mode and not runtime.options.plan_mode_enabled:
        return f"plan_mode=True, but the {runtime.flow_type} Flow has plan mode off"
    if images and not isinstance(runtime.runner, ImageUserMessageBuilder):
        return (
            f"the {runtime.flow_type} Flow's runner cannot take images "
            "(it does not implement ImageUserMessageBuilder.build_user_message_with_images)"
        )
    return None


def checked_user_images(
    runtime: SessionRuntime, images: Sequence[AgentImageReference]
) -> tuple[AgentImageReference, ...]:
    """``images`` checked with ``validate_image_references`` and, when the runner names
    its store (``ImageStoreRunner``), refused unless each is one of its images."""
    checked = validate_image_references(images)
    runner = runtime.runner
    if checked and isinstance(runner, ImageStoreRunner):
        require_images_of_store(checked, runner.image_store_uri, source="the message has")
    return checked


def accepts_user_message(runtime: SessionRuntime, message: AgentUserMessage) -> bool:
    """The rules of ``send_user_message``, for queued and steered text: non-blank text the
    Flow can take (``user_message_refusal``); an invalid image reference raises."""
    if not message.text.strip():
        return False
    if user_message_refusal(runtime, plan_mode=message.plan_mode, images=message.images):
        return False
    checked_user_images(runtime, message.images)
    return True


def build_user_message(
    runtime: SessionRuntime, text: str, images: Sequence[AgentImageReference]
) -> FrameworkMessage:
    """The runner's user message for ``text`` (with images through ``ImageUserMessageBuilder``)."""
    runner = runtime.runner
    if images:
        if not isinstance(runner, ImageUserMessageBuilder):
            raise SessionStateError(
                "the runner cannot show images, so the message cannot be stored"
            )
        message = check_user_message(runner.build_user_message_with_images(text, images))
        # The session sets the stored user message's images itself.
        return attrs.evolve(message, images=tuple(images))
    return check_user_message(runner.build_user_message(text))


def store_turn_messages(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    messages: Sequence[FrameworkMessage],
    turn_id: str,
) -> tuple[int, tuple[AgentMessage, ...]]:
    """Stage ``messages`` of ``turn_id`` with the session's storage options, in this Step's commit.

    Returns the new ``last_sequence`` for the caller's ``AgentState`` and the stored
    messages (``message_store.store_messages``).
    """
    return store_messages(
        context.state,
        agent_state,
        messages,
        turn_id=turn_id,
        options=runtime.message_storage,
        now=context.now,
        compaction_enabled=runtime.options.compaction is not None,
    )


def start_turn(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    messages: Sequence[FrameworkMessage],
    mode: InteractionMode,
) -> AgentState:
    """Store a new turn's user messages and make it the active turn; stage ``turn_started``."""
    state = context.state
    number = agent_state.turn_count + 1
    turn = make_turn_id(number)
    last_sequence, stored = store_turn_messages(context, runtime, agent_state, messages, turn)
    state.set(TURN_REPLY_SEQUENCE, TurnReplySequence(turn_id=turn, sequence=last_sequence + 1))
    state.set(TURN_SESSION_SETTINGS, copy_settings_for_turn(state.get(SESSION_SETTINGS), turn))
    state.delete(FRAMEWORK_RUN_STATE)
    agent_state = attrs.evolve(
        agent_state,
        status=AgentStatus.RUNNING_MODEL,
        last_sequence=last_sequence,
        interaction_mode=mode,
        active_turn_id=turn,
        turn_count=number,
        turn_started_at=context.now,
        accepts_turn_control=True,
    )
    state.set(AGENT_STATE, agent_state)
    first = stored[0].sequence if stored else agent_state.last_sequence
    start_activation(
        context,
        runtime,
        turn_id=turn,
        trigger="user_message",
        user_message_key=message_sequence_key(first) if stored else None,
        user_text="\n\n".join(item.text for item in stored if item.text) if stored else None,
    )
    commit_event(
        context,
        runtime.stream,
        turn,
        AgentEventType.TURN_STARTED,
        TurnStartedPayload(sequence=first),
    )
    return agent_state


def clear_turn(state: StateTransaction, records: Sequence[str]) -> None:
    """Delete the turn's tool call records, its run state and its interrupts."""
    for key in records:
        state.delete_instance(AGENT_TOOL_CALLS, key)
    state.delete(FRAMEWORK_RUN_STATE)
    state.set(PENDING_INTERRUPTS, ())


def end_turn(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    *,
    error: str | None,
    last_sequence: int | None = None,
) -> AgentState:
    """End the active turn: wait for the next message; stage ``turn_completed`` or ``turn_failed``.

    A completed turn clears ``last_turn_error``; a failed one sets it. ``last_sequence``
    is that of messages this Step stored for the turn (``store_turn_messages``), when it
    stored any.
    """
    state = context.state
    turn = agent_state.active_turn_id
    clear_turn(state, list(turn_records(state)))
    agent_state = attrs.evolve(
        agent_state,
        status=AgentStatus.WAITING_FOR_USER_MESSAGE,
        active_turn_id=None,
        last_sequence=agent_state.last_sequence if last_sequence is None else last_sequence,
        last_turn_error=error,
        failed_turn_id=None if error is None else turn,
    )
    state.set(AGENT_STATE, agent_state)
    if error is None:
        commit_event(
            context,
            runtime.stream,
            turn,
            AgentEventType.TURN_COMPLETED,
            TurnCompletedPayload(message_count=agent_state.last_sequence),
        )
    else:
        commit_event(
            context,
            runtime.stream,
            turn,
            AgentEventType.TURN_FAILED,
            TurnFailedPayload(error=error),
        )
    return agent_state


def record_usage(
    context: StepContext, runtime: SessionRuntime, turn: str | None, usage: AgentUsage
) -> None:
    """Add one call's usage to the session total; stage ``usage_recorded``."""
    state = context.state
    total = (state.get(AGENT_USAGE) or AgentUsage()) + usage
    state.set(AGENT_USAGE, total)
    commit_event(
        context,
        runtime.stream,
        turn,
        AgentEventType.USAGE_RECORDED,
        UsageRecordedPayload(recorded=usage, session=total),
    )


def deadline_from(now: datetime, options: AgentSessionOptions) -> datetime | None:
    """An interrupt's deadline under ``interrupt_deadline`` (Worker clock)."""
    return None if options.interrupt_deadline is None else now + options.interrupt_deadline
