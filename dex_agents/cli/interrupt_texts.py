"""What the chat says about an approval or a question that its prompt asked: why the
session refused an answer, why the interrupt went away, or that another window
answered it first."""

from __future__ import annotations

from datetime import datetime

from dex_agents.cli import terminal
from dex_agents.domain.builtin_tools import is_allowed_answer
from dex_agents.domain.events import InterruptResolvedPayload
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import CancellationReason

TURN_WAS_CANCELLED = "its turn was cancelled"
"""``gone_reason`` of an interrupt whose turn was cancelled."""


def refusal_reason(interrupt: AgentInterrupt, answer: str | None, now: datetime) -> str:
    """The best reason the session can have had to refuse ``answer`` (``None`` for a
    decision) to ``interrupt``, which is still pending."""
    if interrupt.deadline is not None and now >= interrupt.deadline:
        return f"its deadline passed at {interrupt.deadline:%Y-%m-%d %H:%M:%S} UTC"
    if answer is not None and not is_allowed_answer(
        answer, choices=interrupt.choices, allows_free_text=interrupt.allows_free_text
    ):
        choices = ", ".join(terminal.escaped(choice) for choice in interrupt.choices)
        return f"the question takes one of: {choices}" if choices else "the answer is blank"
    return "the session refused it (its turn may be ending or being cancelled)"


def gone_reason(
    interrupt: AgentInterrupt,
    snapshot: AgentSnapshot,
    now: datetime,
    cancelled: CancellationReason | None = None,
) -> str | None:
    """Why ``interrupt`` is no longer pending, when it was not another window's answer.

    ``cancelled`` is the cancellation reason the Stream reported for it: once the
    cancelled or steered turn ended, its call is no longer in ``snapshot``.
    """
    if interrupt.deadline is not None and now >= interrupt.deadline:
        return f"its deadline passed at {interrupt.deadline:%Y-%m-%d %H:%M:%S} UTC"
    call = next((c for c in snapshot.tool_calls if c.tool_call_id == interrupt.tool_call_id), None)
    reason = (None if call is None else call.cancellation_reason) or cancelled
    if reason is CancellationReason.TURN_CANCELLED:
        return TURN_WAS_CANCELLED
    if reason is CancellationReason.STEERED:
        return "its turn was steered by a newer message"
    return None


def answered_elsewhere_text(
    interrupt: AgentInterrupt, resolved: InterruptResolvedPayload | None
) -> str:
    """What the chat says when another window resolved ``interrupt`` while its prompt waited;
    ``resolved`` is its ``interrupt_resolved`` event, when the Stream reported it."""
    if interrupt.kind == InterruptKind.QUESTION:
        declined = resolved is not None and not resolved.answered
        return f"this question was {'declined' if declined else 'answered'} elsewhere"
    if resolved is None:
        return "this approval was answered elsewhere"
    return (
        f"this approval was answered elsewhere: {'approved' if resolved.approved else 'rejected'}"
    )
