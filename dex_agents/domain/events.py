"""Events on the ``AgentEvents`` Stream: every ``AgentEventType`` and its payload.

Every event carries ``turn_id``, ``step_execution_id`` (shared by all attempts of
one Step execution) and the Step ``attempt``. A runner or tool may also write
events of its own type (such as ``mcp.tool_progress``) whose payload is a plain
JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

import attrs

from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.plans import PlanStatus
from dex_agents.domain.tool_calls import CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.usage import AgentUsage


class AgentEventType(StrEnum):
    """The session's own event types, as the wire carries them."""

    TURN_STARTED = "turn_started"
    TURN_COMPLETED = "turn_completed"
    TURN_FAILED = "turn_failed"
    TURN_STEERED = "turn_steered"
    TURN_CANCELLED = "turn_cancelled"
    TEXT_DELTA = "text_delta"
    REASONING_DELTA = "reasoning_delta"
    TOOL_CALL_STARTED = "tool_call_started"
    TOOL_CALL_FINISHED = "tool_call_finished"
    TOOL_CALL_DEFERRED = "tool_call_deferred"
    INTERRUPT_RAISED = "interrupt_raised"
    INTERRUPT_RESOLVED = "interrupt_resolved"
    TIMER_STARTED = "timer_started"
    PLAN_UPDATED = "plan_updated"
    PLAN_EXECUTION_STARTED = "plan_execution_started"
    TOOL_TASK_STARTED = "tool_task_started"
    USAGE_RECORDED = "usage_recorded"
    COMPACTION_STARTED = "compaction_started"
    COMPACTION_FINISHED = "compaction_finished"
    MCP_TOOL_PROGRESS = "mcp.tool_progress"
    MCP_TASK_STATUS = "mcp.task_status"


@attrs.frozen(kw_only=True)
class TurnStartedPayload:
    """``turn_started``: the sequence of the turn's first message."""

    sequence: int


@attrs.frozen(kw_only=True)
class TurnCompletedPayload:
    """``turn_completed``: how many messages the session holds now."""

    message_count: int


@attrs.frozen(kw_only=True)
class TurnFailedPayload:
    """``turn_failed``: the turn's error, as ``last_turn_error`` holds it."""

    error: str


@attrs.frozen(kw_only=True)
class TurnSteeredPayload:
    """``turn_steered``: how many steered messages start the next turn."""

    steered_message_count: int
    message_count: int


@attrs.frozen(kw_only=True)
class TurnCancelledPayload:
    """``turn_cancelled``."""

    message_count: int


@attrs.frozen(kw_only=True)
class TextDeltaPayload:
    """``text_delta`` and ``reasoning_delta``: a piece of live text."""

    text: str


@attrs.frozen(kw_only=True)
class ToolCallStartedPayload:
    """``tool_call_started``."""

    tool_call_id: str
    tool_name: str


@attrs.frozen(kw_only=True)
class ToolCallFinishedPayload:
    """``tool_call_finished``: once per tool call, rejections included."""

    tool_call_id: str
    tool_name: str
    status: ToolCallStatus = attrs.field(converter=ToolCallStatus)


@attrs.frozen(kw_only=True)
class ToolCallDeferredPayload:
    """``tool_call_deferred``: the call's effect and approval after the policies."""

    tool_call_id: str
    tool_name: str
    effect: ToolEffect = attrs.field(converter=ToolEffect)
    requires_approval: bool


@attrs.frozen(kw_only=True)
class InterruptRaisedPayload:
    """``interrupt_raised``."""

    interrupt_id: str
    tool_call_id: str
    tool_name: str
    deadline: datetime | None
    kind: InterruptKind = attrs.field(converter=InterruptKind)
    question: str | None = None
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True


@attrs.frozen(kw_only=True)
class InterruptResolvedPayload:
    """``interrupt_resolved``; ``cancellation_reason`` is set when steering or cancellation removed it."""

    interrupt_id: str
    approved: bool
    rejection_message: str | None
    kind: InterruptKind = attrs.field(converter=InterruptKind)
    answered: bool
    cancellation_reason: CancellationReason | None = None


@attrs.frozen(kw_only=True)
class TimerStartedPayload:
    """``timer_started``: a durable wait until ``wait_until``."""

    tool_call_id: str
    wait_until: datetime
    reason: str


@attrs.frozen(kw_only=True)
class PlanUpdatedPayload:
    """``plan_updated``: after ``write_todos``, or when an approval marks a draft ``active``."""

    revision: int
    status: PlanStatus = attrs.field(converter=PlanStatus)
    task_count: int


@attrs.frozen(kw_only=True)
class PlanExecutionStartedPayload:
    """``plan_execution_started``."""

    revision: int


@attrs.frozen(kw_only=True)
class ToolTaskStartedPayload:
    """``tool_task_started``."""

    tool_call_id: str
    tool_name: str
    task_id: str


@attrs.frozen(kw_only=True)
class UsageRecordedPayload:
    """``usage_recorded``: this call's usage and the session total after it."""

    recorded: AgentUsage
    session: AgentUsage


@attrs.frozen(kw_only=True)
class CompactionStartedPayload:
    """``compaction_started``."""

    through_sequence: int


@attrs.frozen(kw_only=True)
class CompactionFinishedPayload:
    """``compaction_finished``."""

    generation: int
    through_sequence: int


@attrs.frozen(kw_only=True)
class McpToolProgressPayload:
    """``mcp.tool_progress``: an MCP ``notifications/progress`` of a running call."""

    tool_call_id: str
    tool_name: str
    progress: float
    total: float | None = None
    message: str | None = None


EventPayload = (
    TurnStartedPayload
    | TurnCompletedPayload
    | TurnFailedPayload
    | TurnSteeredPayload
    | TurnCancelledPayload
    | TextDeltaPayload
    | ToolCallStartedPayload
    | ToolCallFinishedPayload
    | ToolCallDeferredPayload
    | InterruptRaisedPayload
    | InterruptResolvedPayload
    | TimerStartedPayload
    | PlanUpdatedPayload
    | PlanExecutionStartedPayload
    | ToolTaskStartedPayload
    | UsageRecordedPayload
    | CompactionStartedPayload
    | CompactionFinishedPayload
    | McpToolProgressPayload
)

EVENT_PAYLOAD_TYPES: Mapping[str, type[EventPayload]] = {
    AgentEventType.TURN_STARTED: TurnStartedPayload,
    AgentEventType.TURN_COMPLETED: TurnCompletedPayload,
    AgentEventType.TURN_FAILED: TurnFailedPayload,
    AgentEventType.TURN_STEERED: TurnSteeredPayload,
    AgentEventType.TURN_CANCELLED: TurnCancelledPayload,
    AgentEventType.TEXT_DELTA: TextDeltaPayload,
    AgentEventType.REASONING_DELTA: TextDeltaPayload,
    AgentEventType.TOOL_CALL_STARTED: ToolCallStartedPayload,
    AgentEventType.TOOL_CALL_FINISHED: ToolCallFinishedPayload,
    AgentEventType.TOOL_CALL_DEFERRED: ToolCallDeferredPayload,
    AgentEventType.INTERRUPT_RAISED: InterruptRaisedPayload,
    AgentEventType.INTERRUPT_RESOLVED: InterruptResolvedPayload,
    AgentEventType.TIMER_STARTED: TimerStartedPayload,
    AgentEventType.PLAN_UPDATED: PlanUpdatedPayload,
    AgentEventType.PLAN_EXECUTION_STARTED: PlanExecutionStartedPayload,
    AgentEventType.TOOL_TASK_STARTED: ToolTaskStartedPayload,
    AgentEventType.USAGE_RECORDED: UsageRecordedPayload,
    AgentEventType.COMPACTION_STARTED: CompactionStartedPayload,
    AgentEventType.COMPACTION_FINISHED: CompactionFinishedPayload,
    AgentEventType.MCP_TOOL_PROGRESS: McpToolProgressPayload,
}
"""The payload class of each event type the session knows; other types carry a plain object."""


def _check_payload(
    instance: AgentEvent, _attribute: object, payload: EventPayload | Mapping[str, Any]
) -> None:
    expected = EVENT_PAYLOAD_TYPES.get(instance.type)
    if expected is None:
        if not isinstance(payload, Mapping):
            raise TypeError(f"event {instance.type} needs a JSON object payload")
    elif not isinstance(payload, expected):
        raise TypeError(f"event {instance.type} needs a {expected.__name__}")


@attrs.frozen(kw_only=True)
class AgentEvent:
    """One ``AgentEvents`` Stream message.

    A UI groups live text by ``(turn_id, step_execution_id, attempt)`` and keeps
    only the highest ``attempt`` of one ``step_execution_id``.
    """

    # A plain string, as decoding gives it, even when built from an ``AgentEventType``.
    type: str = attrs.field(converter=str)
    payload: EventPayload | Mapping[str, Any] = attrs.field(validator=_check_payload)
    turn_id: str | None
    step_execution_id: str
    attempt: int
