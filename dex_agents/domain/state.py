"""The session's own state: ``AgentState`` and the small Attributes and inputs around turns."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

import attrs

from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import image_tuple


class AgentStatus(StrEnum):
    """What the session is doing (``AgentState.status``)."""

    WAITING_FOR_USER_MESSAGE = "waiting_for_user_message"
    RUNNING_MODEL = "running_model"
    RUNNING_TOOLS = "running_tools"
    COMPACTING_CONTEXT = "compacting_context"


class InteractionMode(StrEnum):
    """The kind of the active or last turn (``AgentState.interaction_mode``)."""

    CHAT = "chat"
    PLANNING = "planning"
    EXECUTING = "executing"


def _agent_status(value: AgentStatus | str) -> AgentStatus:
    # A member as it is, by its type: calling the enum class on Python 3.11 runs
    # EnumType.__call__ and its slow attribute hook, about three times the instructions,
    # and a turn builds this value's fields several times.
    return value if type(value) is AgentStatus else AgentStatus(value)


def _interaction_mode(value: InteractionMode | str) -> InteractionMode:
    # As _agent_status.
    return value if type(value) is InteractionMode else InteractionMode(value)


@attrs.frozen(kw_only=True)
class AgentState:
    """The ``AgentState`` Attribute.

    ``turn_count`` numbers turns (``turn-<n>``); ``last_sequence`` is the newest
    stored message's sequence (0 before the first). ``accepts_turn_control`` is
    ``False`` for a turn that cannot be steered or cancelled. ``failed_turn_id``
    is the turn whose failure ``last_turn_error`` holds: a later steered or
    cancelled turn keeps the error but is not a failed turn itself.
    ``cancelled_turn_id`` is the turn ``cancel_turn`` ended last: an idle state
    looks the same after a completed turn, and this says the newest one was
    cancelled while it is ``turn-<turn_count>``.
    """

    status: AgentStatus = attrs.field(converter=_agent_status)
    interaction_mode: InteractionMode = attrs.field(
        default=InteractionMode.CHAT, converter=_interaction_mode
    )
    active_turn_id: str | None = None
    turn_count: int = 0
    last_sequence: int = 0
    last_turn_error: str | None = None
    accepts_turn_control: bool = True
    turn_started_at: datetime | None = None
    failed_turn_id: str | None = None
    cancelled_turn_id: str | None = None


@attrs.frozen(kw_only=True)
class TurnReplySequence:
    """Where the latest turn's replies start (``TurnReplySequence``)."""

    turn_id: str
    sequence: int


@attrs.frozen(kw_only=True)
class TurnCancellationRequest:
    """The ``TurnCancellationRequest`` Attribute that only ``cancel_turn`` writes."""

    turn_id: str
    requested_at: datetime | None = None


class TurnControlKind(StrEnum):
    """What a ``TurnControlRequests`` message asks for."""

    STEER = "steer"
    CANCEL = "cancel"


@attrs.frozen(kw_only=True)
class TurnControlRequest:
    """The internal ``TurnControlRequests`` message that wakes a waiting Step for a steer or cancel."""

    kind: TurnControlKind = attrs.field(converter=TurnControlKind)
    turn_id: str | None = None


@attrs.frozen(kw_only=True)
class TurnSessionSettings:
    """The running turn's copy of the session settings (``TurnSessionSettings``).

    A copy tagged with another turn reads as no settings.
    """

    turn_id: str
    settings: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class AgentSessionStartInput:
    """The start input of a session Flow (``StartAgentSession``).

    ``start_environment`` says where the starting program ran; the session never
    reads it. A blank ``initial_message`` starts no turn.
    """

    initial_message: str = ""
    session_settings: Mapping[str, Any] | None = None
    start_environment: Mapping[str, str] = attrs.field(factory=dict)
    plan_mode: bool = False
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)


@attrs.frozen(kw_only=True)
class CompactContextInput:
    """The input of ``CompactContext``: the last message sequence to summarize."""

    through_sequence: int
