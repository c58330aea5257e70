"""How the newest turn ended, from its Stream events listed newest first."""

from __future__ import annotations

from dex_agents.domain.events import AgentEventType
from dex_agents.domain.turn_ends import newest_turn_end


def test_the_turns_end_event_says_how_it_ended_past_later_events_of_its_own_or_none() -> None:
    # A cancelled turn's background call may still finish after the turn's end.
    events = [
        ("tool_call_finished", "turn-2"),
        ("usage_recorded", None),
        ("turn_cancelled", "turn-2"),
        ("text_delta", "turn-2"),
    ]
    assert newest_turn_end(events, "turn-2") == (AgentEventType.TURN_CANCELLED, True)
    assert newest_turn_end([("turn_completed", "turn-2")], "turn-2") == (
        AgentEventType.TURN_COMPLETED,
        True,
    )


def test_the_walk_goes_on_until_the_turns_start_or_an_earlier_turn() -> None:
    assert newest_turn_end([("text_delta", "turn-2"), ("x", None)], "turn-2") == (None, False)
    assert newest_turn_end([], "turn-2") == (None, False)
    # The end was trimmed from the Stream: nothing older can hold it.
    assert newest_turn_end([("turn_started", "turn-2")], "turn-2") == (None, True)
    assert newest_turn_end([("turn_cancelled", "turn-1")], "turn-2") == (None, True)
