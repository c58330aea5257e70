"""Interrupts: approvals and questions that wait for a person."""

from __future__ import annotations

from collections.abc import Collection, Iterable
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


def tool_input_interrupt_id(tool_call_id: str, n: int) -> str:
    """The interrupt ID of a tool's own question: ``<tool_call_id>-input-<n>``.

    ``n`` numbers the call's questions from 1 (its record's ``input_request_count``
    once the question is stored). Raises ``ValueError`` for an empty
    ``tool_call_id`` or an ``n`` below 1.
    """
    if not tool_call_id:
        raise ValueError("tool_call_id must not be empty")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int of at least 1, not {n!r}")
    return f"{tool_call_id}-input-{n}"


def input_interrupt_id_taken(
    interrupt_id: str, record_ids: Collection[str], pending_interrupt_ids: Collection[str]
) -> bool:
    """Whether another call of the turn already uses a tool question's interrupt ID.

    ``record_ids`` are the tool call IDs of the turn's records, and
    ``pending_interrupt_ids`` the IDs in ``PendingInterrupts`` (an approval's and an
    ``ask_user`` question's ID is its tool call ID). ``AwaitQuestionAnswer`` asks this
    under the ``PendingInterrupts`` lock before it raises the ``question``
    interrupt; when it is ``True``, the asking call records ``failed`` instead.
    Leave out an interrupt that this same question already raised, such as on a
    retried Execute, as no other call uses it.
    """
    return interrupt_id in record_ids or interrupt_id in pending_interrupt_ids


def without_interrupt(
    pending: tuple[AgentInterrupt, ...], interrupt_id: str
) -> tuple[AgentInterrupt, ...]:
    """``PendingInterrupts`` once the interrupt ``interrupt_id`` is resolved or cancelled."""
    return tuple(item for item in pending if item.interrupt_id != interrupt_id)


def answerable_interrupts(
    pending: Iterable[AgentInterrupt], cancelled_turn_id: str | None, *, now: datetime
) -> tuple[AgentInterrupt, ...]:
    """The interrupts of ``pending`` that an answer can still reach at ``now``, in order.

    ``cancelled_turn_id`` is the turn of the ``TurnCancellationRequest``, if any.
    ``cancel_turn`` records it, and ``FinishTurnCancellation`` removes that turn's
    interrupts later, in a commit of its own; until then they are still in
    ``PendingInterrupts``, but ``resolve_interrupt`` and ``answer_question`` refuse
    them, so no person is asked for them. The same holds for an interrupt past
    its deadline: its Timer removes it once a worker runs it, and until then
    (forever while no worker runs) every answer is refused.
    """
    return tuple(
        item
        for item in pending
        if item.turn_id != cancelled_turn_id and (item.deadline is None or now < item.deadline)
    )
