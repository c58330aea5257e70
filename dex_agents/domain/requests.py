"""The session RPCs' request and response values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from dex_agents.domain.context_summary import ContextSummary
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import AgentMessage, QueuedUserMessage, image_tuple
from dex_agents.domain.plans import AgentPlan, PlanExecutionRequest
from dex_agents.domain.state import AgentState
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.usage import AgentUsage


@attrs.frozen
class ExecutePlanRequest:
    """``execute_plan``: approve plan ``revision`` for execution.

    The spec calls it positionally, ``execute_plan(ExecutePlanRequest(revision))``;
    ``revision=`` works too.
    """

    revision: int


@attrs.frozen(kw_only=True)
class SteerUserMessageRequest:
    """``steer_user_message``: move a queued message by ``message_id``, or steer with ``text``.

    Exactly one of the two must be set.
    """

    message_id: str | None = None
    text: str | None = None
    plan_mode: bool = False
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)


@attrs.frozen(kw_only=True)
class DeleteQueuedMessageRequest:
    """``delete_queued_message``: delete a queued message by its Channel message ID."""

    message_id: str


@attrs.frozen(kw_only=True)
class CancelTurnRequest:
    """``cancel_turn``: stop turn ``turn_id`` now, with no new turn."""

    turn_id: str


@attrs.frozen(kw_only=True)
class ResolveInterruptRequest:
    """``resolve_interrupt``: approve or reject an approval, or decline a question."""

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None


@attrs.frozen(kw_only=True)
class AnswerQuestionRequest:
    """``answer_question``: answer a pending question."""

    interrupt_id: str
    answer: str


@attrs.frozen(kw_only=True)
class UpdateSessionSettingsRequest:
    """``update_session_settings``: replace the session settings; ``{}`` clears them."""

    session_settings: Mapping[str, Any] | None


@attrs.frozen(kw_only=True)
class ListAgentMessagesRequest:
    """``list_agent_messages``: a page of stored messages, oldest first.

    With ``before_sequence`` the page holds the newest messages before it (paging
    back toward ``AgentMessageIndex.first_sequence``); with ``after_sequence`` the
    oldest messages after it (copying new messages out); with neither, the newest
    page. ``limit`` is clamped to 1..200.
    """

    before_sequence: int | None = None
    after_sequence: int | None = None
    limit: int = 100


@attrs.frozen(kw_only=True)
class AgentMessagesPage:
    """A page of ``list_agent_messages``.

    ``has_more`` says whether more messages lie beyond the page in the direction
    paged. ``deleted_before_sequence`` is set once retention deleted earlier
    messages: every sequence below it is gone.
    """

    messages: tuple[AgentMessage, ...]
    has_more: bool
    deleted_before_sequence: int | None = None


@attrs.frozen(kw_only=True)
class AgentSnapshot:
    """What ``get_agent_snapshot`` returns.

    ``state`` is ``None`` until ``StartAgentSession`` commits. ``messages`` are the
    last 200 stored messages; ``tool_calls`` the active turn's records in model
    order; ``session_settings`` the next turn's settings.
    ``pending_plan_execution`` is the approval ``execute_plan`` accepted that
    ``AwaitUserMessage`` has not taken yet, so its executing turn starts next; an
    approval of a replaced revision never runs and is left out.
    """

    state: AgentState | None
    messages: tuple[AgentMessage, ...] = ()
    pending_interrupts: tuple[AgentInterrupt, ...] = ()
    tool_calls: tuple[AgentToolCall, ...] = ()
    usage: AgentUsage = attrs.field(factory=AgentUsage)
    queued_message_count: int = 0
    queued_messages: tuple[QueuedUserMessage, ...] = ()
    steered_messages: tuple[QueuedUserMessage, ...] = ()
    plan: AgentPlan | None = None
    session_settings: Mapping[str, Any] = attrs.field(factory=dict)
    context_summary: ContextSummary | None = None
    deleted_before_sequence: int | None = None
    pending_plan_execution: PlanExecutionRequest | None = None
