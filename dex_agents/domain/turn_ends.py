"""The events that end a turn: one per turn, and its type says how the turn ended.

A reader that follows the Stream live (the chat) waits for one of them. A reader
of the state alone learns how the newest turn ended from ``AgentState``
(``attention.last_turn_failed`` and ``last_turn_cancelled``) and needs no event.
"""

from __future__ import annotations

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
