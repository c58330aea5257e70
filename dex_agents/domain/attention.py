"""When a session needs a person: the rule behind ``AgentSessionClient.wait_for_user``.

A session needs a person when an approval or a question waits for an answer,
or when it is idle: no turn is active, nothing is queued or steered, and it
waits for the next user message (its last turn ended, failed or was cancelled).
A message the session has accepted is always either queued or stored (both
engines list a message as queued until the Step that took it stores it), and a
plan approval ``execute_plan`` accepted is pending until its turn starts, so an
idle snapshot never hides a turn that is about to start.
"""

from __future__ import annotations

from enum import StrEnum

import attrs

from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentState, AgentStatus, TurnCancellationRequest
from dex_agents.domain.turns import turn_id


class SessionAttention(StrEnum):
    """Why a session needs a person now."""

    APPROVAL = "approval"
    """A tool call waits for ``resolve_interrupt``."""
    QUESTION = "question"
    """A question waits for ``answer_question`` (or ``resolve_interrupt`` to decline it)."""
    TURN_FAILED = "turn_failed"
    """The session is idle and its last turn failed (``last_turn_failed``)."""
    IDLE = "idle"
    """The session is idle and waits for the next user message."""


def last_turn_failed(state: AgentState) -> bool:
    """Whether the newest turn failed, so ``state.last_turn_error`` is its error.

    ``last_turn_error`` outlives a later steered or cancelled turn (only a
    completed turn clears it), so the error alone does not say the newest turn
    failed. A state stored before ``failed_turn_id`` was kept has none: its
    error is taken as the newest turn's, as it was then.
    """
    if not state.last_turn_error:
        return False
    if state.failed_turn_id is None or state.turn_count < 1:
        return True
    return state.failed_turn_id == turn_id(state.turn_count)


def last_turn_cancelled(state: AgentState) -> bool:
    """Whether no turn runs and the newest turn was cancelled (``cancel_turn``).

    Read from the state alone, so a listing of many sessions need not read their
    events. A state stored before ``cancelled_turn_id`` was kept has none; the
    snapshots fill it in from the ``TurnCancellationRequest`` (``with_cancelled_turn``).
    """
    if state.active_turn_id is not None or state.turn_count < 1:
        return False
    return state.cancelled_turn_id == turn_id(state.turn_count)


def with_cancelled_turn(state: AgentState, request: TurnCancellationRequest | None) -> AgentState:
    """``state`` with ``cancelled_turn_id`` set from ``request`` (the ``TurnCancellationRequest``)
    when a state stored before that field was kept leaves it unset.

    Only ``cancel_turn`` writes the request, only for the active turn, and once it is
    recorded that turn can end no other way than cancelled. So a request that names
    the newest turn of an idle state says that turn was cancelled, as
    ``cancelled_turn_id`` does for a state stored since.
    """
    if (
        state.cancelled_turn_id is not None
        or request is None
        or state.active_turn_id is not None
        or state.turn_count < 1
        or request.turn_id != turn_id(state.turn_count)
    ):
        return state
    return attrs.evolve(state, cancelled_turn_id=request.turn_id)


def session_attention(snapshot: AgentSnapshot) -> SessionAttention | None:
    """Why the session of ``snapshot`` needs a person, or ``None`` while it works on its own.

    A pending interrupt comes first (the oldest one decides between approval and
    question); then an idle session. A session whose ``AgentState`` is not
    committed yet (``state`` is ``None``) is still starting.
    """
    if snapshot.pending_interrupts:
        first = snapshot.pending_interrupts[0]
        if first.kind is InterruptKind.QUESTION:
            return SessionAttention.QUESTION
        return SessionAttention.APPROVAL
    state = snapshot.state
    if state is None:
        return None
    idle = (
        state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        and state.active_turn_id is None
        and snapshot.queued_message_count == 0
        and not snapshot.queued_messages
        and not snapshot.steered_messages
        and snapshot.pending_plan_execution is None
    )
    if not idle:
        return None
    return SessionAttention.TURN_FAILED if last_turn_failed(state) else SessionAttention.IDLE
