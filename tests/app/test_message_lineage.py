"""MessageLineage: which reads of a session's messages start with the read before them.

A lineage lets the built-in loop resume its walk on a read without comparing
its messages, so a lineage that continues where the new read does not start with
the last one would give a model call the wrong input: every case says whether
the lineage continues, and each that continues is a read that does start so.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dex_agents.app.message_lineage import MessageLineage
from dex_agents.app.message_store import CHUNK_RUNS, MESSAGE_LINEAGE, all_messages
from dex_agents.domain.messages import AgentMessage
from tests.app.stored_messages_state import (
    StoredMessagesState,
    message_chunk,
    message_index,
    stored_message,
)

Read = tuple[AgentMessage, ...]


def _run(first: int, last: int) -> Read:
    return tuple(stored_message(sequence) for sequence in range(first, last + 1))


HEAD = _run(1, 4)
WINDOW = _run(5, 6)

# Each case: the second read's head and messages, given the first read (HEAD + WINDOW).
CASES: dict[str, tuple[Callable[[], tuple[Read, Read]], bool]] = {
    "the window grew": (lambda: (HEAD, HEAD + WINDOW + (stored_message(7),)), True),
    "an equal read": (lambda: (HEAD, HEAD + _run(5, 6)), True),
    "a window message changed": (
        lambda: (HEAD, (*HEAD, WINDOW[0], stored_message(6, "[]"))),
        False,
    ),
    "the window shrank": (lambda: (HEAD, HEAD + WINDOW[:1]), False),
    # Equal chunks read afresh (another engine, or a cache dropped them): not the same object.
    "an equal head read afresh": (lambda: (_run(1, 4), _run(1, 4) + WINDOW), False),
    "a message rolled over into the head": (lambda: (HEAD + WINDOW[:1], HEAD + WINDOW), False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_read_continues_the_lineage_only_when_it_starts_with_the_last(name: str) -> None:
    build, continues = CASES[name]
    lineages = MessageLineage()
    first = HEAD + WINDOW
    lineages.note("s1", HEAD, first)
    before = lineages.lineage("s1", first)
    head, second = build()
    lineages.note("s1", head, second)
    after = lineages.lineage("s1", second)
    assert before is not None
    assert after is not None
    assert (after is before) is continues
    if continues:
        assert second[: len(first)] == first


@pytest.mark.parametrize(
    ("second", "continues"),
    [
        ((stored_message(1), stored_message(2), stored_message(3)), True),
        ((stored_message(1), stored_message(9)), False),
    ],
    ids=["grew", "changed"],
)
def test_without_chunks_the_whole_read_is_the_window(second: Read, continues: bool) -> None:
    # The empty head is one object in every read, so the window's part is all that is compared.
    lineages = MessageLineage()
    first = (stored_message(1), stored_message(2))
    lineages.note("s1", (), first)
    before = lineages.lineage("s1", first)
    lineages.note("s1", (), second)
    assert (lineages.lineage("s1", second) is before) is continues


def test_only_the_newest_read_of_a_session_has_a_lineage() -> None:
    lineages = MessageLineage()
    first, second = HEAD + WINDOW, HEAD + WINDOW + (stored_message(7),)
    lineages.note("s1", HEAD, first)
    lineages.note("s1", HEAD, second)
    assert lineages.lineage("s1", first) is None
    assert lineages.lineage("s1", HEAD + WINDOW + (stored_message(7),)) is None, "an equal tuple"
    assert lineages.lineage("s2", second) is None
    lineages.note("s2", HEAD, second)
    assert lineages.lineage("s2", second) is not lineages.lineage("s1", second)


def test_a_broken_lineage_is_not_taken_up_again() -> None:
    lineages = MessageLineage()
    first = HEAD + WINDOW
    lineages.note("s1", HEAD, first)
    old = lineages.lineage("s1", first)
    lineages.note("s1", HEAD, HEAD)  # shorter: broken
    lineages.note("s1", HEAD, first)  # starts with HEAD, the read before
    assert lineages.lineage("s1", first) is not old


def test_reads_are_bounded_by_sessions_and_by_messages() -> None:
    by_sessions = MessageLineage(entries=2)
    reads = dict.fromkeys(("s1", "s2", "s3"), HEAD + WINDOW)
    for session, read in reads.items():
        by_sessions.note(session, HEAD, read)
    assert by_sessions.lineage("s1", reads["s1"]) is None, "the least recently read is dropped"
    assert by_sessions.lineage("s3", reads["s3"]) is not None
    by_messages = MessageLineage(most_elements=10)
    read = HEAD + WINDOW
    by_messages.note("s1", HEAD, read)
    later = HEAD + WINDOW
    by_messages.note("s2", HEAD, later)  # 6 + 6 > 10: s1's is dropped
    assert by_messages.lineage("s1", read) is None
    assert by_messages.lineage("s2", later) is not None
    by_messages.clear()
    assert by_messages.lineage("s2", later) is None


def test_all_messages_notes_a_model_calls_reads_in_one_lineage_until_messages_roll_over() -> None:
    state = StoredMessagesState(message_index((1, 4)), [message_chunk(1, 4)], _run(5, 6))
    first = all_messages(state)
    lineage = MESSAGE_LINEAGE.lineage(state.flow_id, first)
    assert lineage is not None
    state.store(stored_message(7))
    snapshot = all_messages(state, keep_chunks=False)  # a snapshot's read is not noted
    assert MESSAGE_LINEAGE.lineage(state.flow_id, snapshot) is None
    second = all_messages(state)
    assert MESSAGE_LINEAGE.lineage(state.flow_id, second) is lineage
    assert second[: len(first)] == first
    state.roll_over(message_index((1, 4), (5, 6)), message_chunk(5, 6))
    third = all_messages(state)
    assert third == second
    assert MESSAGE_LINEAGE.lineage(state.flow_id, third) not in (None, lineage)
    CHUNK_RUNS.clear()
