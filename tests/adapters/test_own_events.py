"""The events a store's own commits appended (``OwnEvents``): linked, and the newest per run."""

from __future__ import annotations

from datetime import UTC, datetime

from dex_agents.adapters.local.own_events import OwnEvents
from dex_agents.ports.flow_rows import EventRow

AT = datetime(2026, 1, 1, tzinfo=UTC)


def event(event_id: int, flow_id: str = "s1") -> EventRow:
    return EventRow(event_id, "Agent", flow_id, f'"{event_id}"', "test", AT)


def test_each_commit_links_its_events_and_leaves_its_last_the_newest() -> None:
    own = OwnEvents()
    own.committed([(1, event(2)), (2, event(3)), (7, event(8, "s2"))], change=5)
    assert own.event_after("s1", 2) == event(3)
    assert own.event_after("s1", 3) is None
    assert own.newest("s1") == (event(3), 5)
    assert own.newest("s2") == (event(8, "s2"), 5)
    own.committed([(3, event(4))], change=6)
    assert own.newest("s1") == (event(4), 6)
    assert own.newest("s2") == (event(8, "s2"), 5)
    assert own.newest("s3") is None


def test_a_commit_that_logged_no_change_leaves_no_event_known_newest() -> None:
    own = OwnEvents()
    own.committed([(1, event(2))], change=5)
    own.committed([(2, event(3))], change=None)
    assert own.newest("s1") is None
    assert own.event_after("s1", 2) == event(3)  # the link holds all the same
    own.committed([], change=9)  # a commit with no events changes nothing
    assert own.newest("s1") is None


def test_past_its_bound_the_oldest_are_forgotten_first() -> None:
    own = OwnEvents(most=2)
    own.committed([(0, event(1, "a"))], change=1)
    own.committed([(0, event(2, "b"))], change=2)
    own.committed([(1, event(3, "a"))], change=3)  # "a" is the most recent again
    own.committed([(0, event(4, "c"))], change=4)
    assert [own.newest(run) for run in "abc"] == [(event(3, "a"), 3), None, (event(4, "c"), 4)]
    assert own.event_after("a", 0) is None
    assert own.event_after("a", 1) == event(3, "a")
