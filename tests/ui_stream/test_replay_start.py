"""Where the event stream of a snapshot starts: a table of Streams, newest event first."""

from __future__ import annotations

import pytest

from dex_agents.domain.ui_stream_replay import ReplaySearch, advance_replay_search

# (event type, turn ID, token that resumes after it), newest first.
Entry = tuple[str, str | None, str]


def search(
    entries: list[Entry], turn_id: str | None, snapshot_token: str | None = None
) -> tuple[str, int]:
    """The answer and how many entries the walk read before it could stop."""
    state = ReplaySearch(turn_id=turn_id, snapshot_token=snapshot_token)
    read = 0
    for event_type, event_turn, token in entries:
        if state.done:
            break
        state = advance_replay_search(
            state, event_type=event_type, event_turn_id=event_turn, resume_token=token
        )
        read += 1
    return state.resume_token, read


PREVIOUS_TURN: list[Entry] = [
    ("turn_completed", "turn-1", "t4"),
    ("usage_recorded", "turn-1", "t3"),
    ("text_delta", "turn-1", "t2"),
    ("turn_started", "turn-1", "t1"),
]
ACTIVE_TURN: list[Entry] = [
    ("tool_call_started", "turn-2", "t8"),
    ("usage_recorded", "turn-2", "t7"),
    ("text_delta", "turn-2", "t6"),
    ("turn_started", "turn-2", "t5"),
]
EXECUTING_TURN: list[Entry] = [
    ("text_delta", "turn-2", "t8"),
    ("turn_started", "turn-2", "t7"),
    ("plan_execution_started", "turn-2", "t6"),
    ("plan_updated", "turn-2", "t5"),
]
NO_TURN: Entry = ("example.note", None, "t4n")

CASES = {
    "an empty Stream, no turn": ([], None, "", 0),
    "an empty Stream, a turn whose events are gone": ([], "turn-2", "", 0),
    "no turn: after the newest event": (PREVIOUS_TURN, None, "t4", 1),
    "a turn: before its turn_started": (ACTIVE_TURN + PREVIOUS_TURN, "turn-2", "t4", 5),
    "a turn whose turn_started is the oldest retained event": (ACTIVE_TURN, "turn-2", "", 4),
    "an executing turn: before its plan events": (
        EXECUTING_TURN + PREVIOUS_TURN,
        "turn-2",
        "t4",
        5,
    ),
    "a turn without turn_started: before its oldest event": (
        ACTIVE_TURN[:2] + PREVIOUS_TURN,
        "turn-2",
        "t4",
        3,
    ),
    "an event without a turn before the turn: after it": (
        [*ACTIVE_TURN, NO_TURN, *PREVIOUS_TURN],
        "turn-2",
        "t4n",
        5,
    ),
    "an event without a turn inside the turn is replayed": (
        [*ACTIVE_TURN[:2], NO_TURN, *ACTIVE_TURN[2:], *PREVIOUS_TURN],
        "turn-2",
        "t4",
        6,
    ),
    "the turn has no retained event yet: after the newest": (
        [NO_TURN, *PREVIOUS_TURN],
        "turn-2",
        "t4n",
        2,
    ),
}


@pytest.mark.parametrize(("entries", "turn_id", "expected", "read"), CASES.values(), ids=CASES)
def test_the_stream_starts_before_the_active_turns_first_event(
    entries: list[Entry], turn_id: str | None, expected: str, read: int
) -> None:
    assert search(entries, turn_id) == (expected, read)


NEXT_TURN: list[Entry] = [
    ("text_delta", "turn-3", "t11"),
    ("turn_started", "turn-3", "t10"),
]
# The snapshot, read at t8, shows turn-2 running; it ended at t9 and turn-3 began.
SNAPSHOT_CASES = {
    "the turn ended and the next began after the snapshot: both are replayed": (
        [*NEXT_TURN, ("turn_completed", "turn-2", "t9"), *ACTIVE_TURN, *PREVIOUS_TURN],
        "t8",
        "t4",
        8,
    ),
    "no bound: the next turn's event ends the walk": (
        [*NEXT_TURN, ("turn_completed", "turn-2", "t9"), *ACTIVE_TURN, *PREVIOUS_TURN],
        None,
        "t11",
        1,
    ),
    "the turn has no retained event: after the newest event before the snapshot": (
        [*NEXT_TURN, NO_TURN, *PREVIOUS_TURN],
        "t4n",
        "t4n",
        4,
    ),
}


@pytest.mark.parametrize(
    ("entries", "snapshot_token", "expected", "read"), SNAPSHOT_CASES.values(), ids=SNAPSHOT_CASES
)
def test_a_turn_that_ended_after_the_snapshot_is_replayed_with_the_next(
    entries: list[Entry], snapshot_token: str | None, expected: str, read: int
) -> None:
    assert search(entries, "turn-2", snapshot_token) == (expected, read)


def test_a_finished_search_ignores_later_events() -> None:
    state = advance_replay_search(
        ReplaySearch(turn_id=None), event_type="text_delta", event_turn_id="t", resume_token="a"
    )
    assert state.done
    again = advance_replay_search(state, event_type="x", event_turn_id=None, resume_token="b")
    assert again is state
