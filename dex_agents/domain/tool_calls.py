"""Tool call records: the ``AgentToolCalls`` AttributeMap values and the internal Channel values."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import attrs

from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import image_tuple
from dex_agents.domain.tool_effects import ToolEffect


class ToolCallStatus(StrEnum):
    """Where a tool call record stands.

    A call waits as ``awaiting_approval``, ``approved``, ``awaiting_answer``,
    ``waiting_for_timer`` or ``waiting_for_task``; it is final as ``rejected``,
    ``succeeded``, ``failed`` or ``outcome_unknown``. A call that needs no approval
    starts ``approved``.
    """

    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    AWAITING_ANSWER = "awaiting_answer"
    WAITING_FOR_TIMER = "waiting_for_timer"
    WAITING_FOR_TASK = "waiting_for_task"
    REJECTED = "rejected"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"

    @property
    def is_final(self) -> bool:
        """Whether no Step will change a record with this status again."""
        return self in _FINAL_STATUSES


_FINAL_STATUSES = frozenset(
    {
        ToolCallStatus.REJECTED,
        ToolCallStatus.SUCCEEDED,
        ToolCallStatus.FAILED,
        ToolCallStatus.OUTCOME_UNKNOWN,
    }
)


class CancellationReason(StrEnum):
    """Why a call that had not started, or an abandoned task, was cancelled."""

    STEERED = "steered"
    TURN_CANCELLED = "turn_cancelled"


def _tool_effect(value: ToolEffect | str) -> ToolEffect:
    # A member as it is, by its type: calling the enum class on Python 3.11 runs
    # EnumType.__call__ and its slow attribute hook, about three times the instructions,
    # and a turn builds this value's fields several times.
    return value if type(value) is ToolEffect else ToolEffect(value)


def _tool_call_status(value: ToolCallStatus | str) -> ToolCallStatus:
    # As _tool_effect.
    return value if type(value) is ToolCallStatus else ToolCallStatus(value)


@attrs.frozen(kw_only=True)
class AgentToolCall:
    """One tool call of the active turn, keyed by its tool call ID in ``AgentToolCalls``.

    ``arguments`` is the model's original JSON text. ``deferral_order`` keeps the
    model's order, which AttributeMap keys do not. ``ordered`` writes run one at a
    time in that order; ``write_queued`` marks one that waits for an earlier write,
    and ``skipped`` one that never ran because an earlier write did not succeed.
    Task fields (``task_id``, ``task_poll_interval_seconds``, ``task_answer_pending``)
    belong to a call whose tool started remote work; ``input_*`` fields to a call
    whose tool asked the user. ``tool_source_reference``, ``trace_context``,
    ``input_continuation``, ``input_answers``, ``task_answer_pending`` and
    ``runner_tool_state`` are for the session's Steps only; browser snapshots leave
    them out.
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    turn_id: str
    effect: ToolEffect = attrs.field(converter=_tool_effect)
    requires_approval: bool
    status: ToolCallStatus = attrs.field(converter=_tool_call_status)
    deferral_order: int
    ordered: bool = False
    write_queued: bool = False
    skipped: bool = False
    built_in: bool = False
    output: str | None = None
    error: str | None = None
    rejection_message: str | None = None
    cancellation_reason: CancellationReason | None = None
    interrupt_id: str | None = None
    question: str | None = None
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True
    input_request_count: int = 0
    input_continuation: str | None = None
    input_answers: tuple[str, ...] = ()
    wait_until: datetime | None = None
    wait_reason: str | None = None
    task_id: str | None = None
    task_poll_interval_seconds: int | None = None
    task_answer_pending: bool = False
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)
    truncated_output_bytes: int | None = None
    tool_source_reference: str | None = None
    trace_context: str | None = None
    runner_tool_state: str | None = None

    @property
    def is_final(self) -> bool:
        """Whether the record is final (``rejected``, ``succeeded``, ``failed``, ``outcome_unknown``)."""
        return self.status.is_final


@attrs.frozen(kw_only=True)
class ToolCallCompleted:
    """The ``ToolCallResults`` message a tool call publishes once, when its record becomes final."""

    tool_call_id: str
    status: ToolCallStatus = attrs.field(converter=_tool_call_status)


@attrs.frozen(kw_only=True)
class ToolCallCancellation:
    """The ``ToolCallCancellations`` message that wakes a waiting approval, question or wait."""

    tool_call_id: str
    reason: CancellationReason = attrs.field(converter=CancellationReason)
