"""Interrupts: approvals and questions that wait for a person."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import attrs

from dex_agents.domain.tool_calls import CancellationReason


class InterruptKind(StrEnum):
    """What an interrupt asks of a person."""

    APPROVAL = "approval"
    QUESTION = "question"


@attrs.frozen(kw_only=True)
class AgentInterrupt:
    """A pending approval or question, listed in the ``PendingInterrupts`` Attribute.

    An approval's ID is its tool call ID; an ``ask_user`` question's too; a tool's
    own question is ``<tool_call_id>-input-<n>``. ``deadline`` comes from
    ``interrupt_deadline`` and the Worker clock.
    """

    interrupt_id: str
    tool_call_id: str
    tool_name: str
    kind: InterruptKind = attrs.field(converter=InterruptKind)
    turn_id: str
    arguments: str = "{}"
    deadline: datetime | None = None
    question: str | None = None
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True


@attrs.frozen(kw_only=True)
class AgentInterruptResolution:
    """The ``InterruptResolutions`` ChannelMap message that answers an interrupt.

    For an approval, ``approved`` decides; ``rejection_message`` is dropped on
    approval. For a question, ``answer`` holds the answer and ``approved=False``
    a decline.
    """

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None
    answer: str | None = None
    cancellation_reason: CancellationReason | None = None


class QuestionResolution(StrEnum):
    """How a tool task's question ended."""

    ANSWERED = "answered"
    DECLINED = "declined"
    DEADLINE_PASSED = "deadline_passed"


@attrs.frozen(kw_only=True)
class QuestionAnswer:
    """What goes back to a tool or task for one of its questions."""

    resolution: QuestionResolution = attrs.field(converter=QuestionResolution)
    answer: str | None = None
