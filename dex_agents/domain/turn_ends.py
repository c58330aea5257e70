"""How a session's newest turn ended, by its end event: an idle snapshot cannot say.

``cancel_turn`` leaves the session idle with ``last_turn_error`` as it was, so
an idle snapshot looks the same after a completed turn and after a cancelled
one; only the turn's end event (``turn_completed``, ``turn_failed``,
``turn_steered`` or ``turn_cancelled``) tells them apart. A reader walks the
Stream newest first, page by page, and hands each page to ``newest_turn_end``.
A turn's events are contiguous in the Stream apart from events without a turn
(one turn is active at a time: ``ui_stream_replay``), so the walk stops at the
turn's ``turn_started`` or at an earlier turn's event: its end was trimmed.
"""

from __future__ import annotations

from collections.abc import Iterable

from dex_agents.domain.events import AgentEventType

TURN_END_EVENTS = frozenset(
    {
        AgentEventType.TURN_COMPLETED,
        AgentEventType.TURN_FAILED,
        AgentEventType.TURN_STEERED,
        AgentEventType.TURN_CANCELLED,
    }
)
"""The event types that end a turn, one per turn."""


def newest_turn_end(
    events: Iterable[tuple[str, str | None]], turn_id: str
) -> tuple[AgentEventType | None, bool]:
    """The end event type of ``turn_id`` among ``events`` (``(event type, turn ID)``, newest
    first), and whether the walk may stop: it met the end, the turn's start, or an event of
    an earlier turn. ``(None, False)``: read the next older page."""
    for event_type, event_turn_id in events:
        if event_turn_id is None:
            continue  # a session-wide event, between a turn's events
        if event_turn_id != turn_id:
            return None, True
        if event_type in TURN_END_EVENTS:
            return AgentEventType(event_type), True
        if event_type == AgentEventType.TURN_STARTED:
            return None, True
    return None, False
