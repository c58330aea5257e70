"""Which of the chat's own messages another window deleted from the session's queue."""

from __future__ import annotations

from dex_agents.cli.own_messages import OwnMessages
from dex_agents.domain.messages import QueuedUserMessage
from dex_agents.domain.requests import AgentSnapshot


def _snapshot(
    queued: tuple[tuple[str, str], ...] = (), steered: tuple[tuple[str, str], ...] = ()
) -> AgentSnapshot:
    return AgentSnapshot(
        state=None,
        queued_messages=tuple(QueuedUserMessage(message_id=i, text=t) for i, t in queued),
        steered_messages=tuple(QueuedUserMessage(message_id=i, text=t) for i, t in steered),
    )


def test_a_message_listed_queued_then_no_longer_was_deleted() -> None:
    own = OwnMessages()
    own.sent("and order 8")
    assert own.deleted(_snapshot(queued=(("m1", "and order 8"),)), own.count) == []
    assert own.deleted(_snapshot(), own.count) == ["and order 8"]
    assert own.deleted(_snapshot(), own.count) == []  # said once


def test_a_message_never_listed_nor_stored_was_deleted() -> None:
    own = OwnMessages()
    own.sent("and order 8")
    assert own.deleted(_snapshot(), own.count) == ["and order 8"]


def test_a_snapshot_read_before_a_message_was_sent_says_nothing_of_it() -> None:
    own = OwnMessages()
    before = own.count
    own.sent("and order 8")
    assert own.deleted(_snapshot(), before) == []
    assert own.deleted(_snapshot(queued=(("m1", "and order 8"),)), own.count) == []


def test_a_stored_message_is_accounted_for() -> None:
    own = OwnMessages()
    own.sent("hello")
    assert own.stored("hello")
    assert not own.stored("hello")  # another window's message with the same text
    assert own.deleted(_snapshot(), own.count) == []


def test_a_later_message_steered_first_leaves_the_earlier_one_queued() -> None:
    own = OwnMessages()
    own.sent("first")
    own.sent("second")
    listed = _snapshot(queued=(("m1", "first"), ("m2", "second")))
    assert own.deleted(listed, own.count) == []
    # Another window steers the second one in: it is stored before the first.
    assert own.deleted(_snapshot(queued=(("m1", "first"),), steered=(("m2", "second"),)), 2) == []
    assert own.stored("second")
    assert own.deleted(_snapshot(queued=(("m1", "first"),)), own.count) == []
    assert own.stored("first")


def test_the_same_text_twice_is_told_apart_by_its_message_id() -> None:
    own = OwnMessages()
    own.sent("yes")
    own.sent("yes")
    assert own.deleted(_snapshot(queued=(("m1", "yes"), ("m2", "yes"))), own.count) == []
    assert own.deleted(_snapshot(queued=(("m2", "yes"),)), own.count) == ["yes"]
    assert own.deleted(_snapshot(queued=(("m2", "yes"),)), own.count) == []
