"""ChunkRuns: a session's kept chunks joined once while its index and chunks stay the same."""

from __future__ import annotations

from typing import TypeVar

import pytest

from dex_agents.app.chunk_runs import ChunkRuns
from dex_agents.app.message_store import CHUNK_RUNS, all_messages
from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex
from dex_agents.domain.paging import chunked_messages
from tests.app.stored_messages_state import (
    StoredMessagesState,
    message_chunk,
    message_index,
    stored_message,
)

T = TypeVar("T")


INDEX = message_index((1, 32), (33, 64), (65, 96))
CHUNKS = (message_chunk(1, 32), message_chunk(33, 64), message_chunk(65, 96))


@pytest.mark.parametrize("after_sequence", [None, 0, 10, 32, 40, 96, 200])
def test_a_run_is_what_chunked_messages_gives(after_sequence: int | None) -> None:
    runs = ChunkRuns()
    expected = chunked_messages(INDEX, CHUNKS, after_sequence=after_sequence)
    assert runs.get("s1", INDEX, CHUNKS, after_sequence=after_sequence) == expected
    assert runs.get("s1", INDEX, list(CHUNKS), after_sequence=after_sequence) == expected


def test_the_same_index_and_chunks_get_the_kept_run() -> None:
    runs = ChunkRuns()
    first = runs.get("s1", INDEX, CHUNKS)
    assert runs.get("s1", INDEX, list(CHUNKS)) is first
    # Equal chunks decoded again (a cache dropped them) still match, element by element.
    again = (message_chunk(1, 32), message_chunk(33, 64), message_chunk(65, 96))
    assert runs.get("s1", INDEX, again) is first
    assert len(runs) == 1


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(
            (message_chunk(1, 32), message_chunk(33, 64), message_chunk(65, 96, "{}\n")),
            id="other text",
        ),
        pytest.param((*CHUNKS, message_chunk(97, 128)), id="one more given"),
    ],
)
def test_other_chunks_under_the_same_index_are_joined_again(
    changed: tuple[AgentMessageChunk, ...],
) -> None:
    runs = ChunkRuns()
    first = runs.get("s1", INDEX, CHUNKS)
    other = runs.get("s1", INDEX, changed)
    assert other is not first
    assert other == chunked_messages(INDEX, changed)


def test_a_session_keeps_one_run_per_floor_and_an_index_read_afresh_replaces_it() -> None:
    runs = ChunkRuns()
    first = runs.get("s1", INDEX, CHUNKS)
    # An engine that decodes every read afresh (Dex) gives an equal index, never the same one.
    equal_index = message_index((1, 32), (33, 64), (65, 96))
    again = runs.get("s1", equal_index, CHUNKS)
    assert again is not first
    assert again == first
    assert runs.get("s1", equal_index, CHUNKS) is again
    assert len(runs) == 1
    assert runs.get("s1", equal_index, CHUNKS, after_sequence=40).messages[0].sequence == 41
    assert runs.get("s2", INDEX, CHUNKS) is not again
    assert len(runs) == 3


def test_a_missing_chunk_is_refused_every_time() -> None:
    runs = ChunkRuns()
    for _ in range(2):
        with pytest.raises(ValueError, match="chunk 000000000033 listed in AgentMessageIndex"):
            runs.get("s1", INDEX, (CHUNKS[0], CHUNKS[2]))
    assert len(runs) == 0


def test_no_index_or_no_chunks_keeps_nothing() -> None:
    runs = ChunkRuns()
    assert runs.get("s1", None, ()).messages == ()
    assert runs.get("s1", AgentMessageIndex(), ()).next_sequence == 1
    assert len(runs) == 0


def test_runs_are_bounded_by_count_and_by_weight() -> None:
    by_count = ChunkRuns(entries=2)
    indexes = [message_index((1, 32), (33, 64), (65, 96)) for _ in range(3)]
    kept = [by_count.get(f"s{n}", index, CHUNKS) for n, index in enumerate(indexes)]
    assert len(by_count) == 2
    assert by_count.get("s0", indexes[0], CHUNKS) is not kept[0]  # the oldest was dropped
    assert by_count.get("s2", indexes[2], CHUNKS) is kept[2]

    by_weight = ChunkRuns(most_weight=100, measured=False)
    first = by_weight.get("s0", indexes[0], CHUNKS)  # 96 messages in 3 chunks of 1 byte: 99
    by_weight.get("s1", indexes[1], CHUNKS)
    assert len(by_weight) == 1
    assert by_weight.get("s0", indexes[0], CHUNKS) is not first
    too_long = ChunkRuns(most_weight=50, measured=False)
    too_long.get("s1", INDEX, CHUNKS)
    assert len(too_long) == 0
    by_count.clear()
    assert len(by_count) == 0


def test_a_run_weighs_the_stored_size_of_the_chunks_after_its_floor() -> None:
    heavy = message_index((1, 32), (33, 64), (65, 96), size=40)
    runs = ChunkRuns(most_weight=100, measured=False)
    runs.get("s0", heavy, CHUNKS)  # 96 messages and 120 bytes: not kept
    assert len(runs) == 0
    kept = runs.get("s0", heavy, CHUNKS, after_sequence=64)  # 32 and 40
    assert runs.get("s0", heavy, CHUNKS, after_sequence=64) is kept


def test_by_default_a_process_keeps_the_runs_of_many_sessions() -> None:
    # 30 sessions of 200 turns (800 messages of 250 bytes each) and 1,000 short ones.
    spans = [(first, first + 31) for first in range(1, 800, 32)]
    index = message_index(*spans, size=32 * 250)
    chunks = tuple(message_chunk(a, b) for a, b in spans)
    short_index, short_chunks = message_index((1, 8), size=8 * 250), (message_chunk(1, 8),)
    runs = ChunkRuns()
    long = [runs.get(f"long-{n}", index, chunks) for n in range(30)]
    short = [runs.get(f"short-{n}", short_index, short_chunks) for n in range(1000)]
    assert all(runs.get(f"long-{n}", index, chunks) is run for n, run in enumerate(long))
    assert all(
        runs.get(f"short-{n}", short_index, short_chunks) is run for n, run in enumerate(short)
    )


@pytest.mark.parametrize(("keep_chunks", "kept"), [(True, 1), (False, 0)])
def test_all_messages_keeps_a_model_calls_chunks_not_a_snapshots(
    keep_chunks: bool, kept: int
) -> None:
    index = message_index((1, 32), (33, 64), (65, 96))
    state = StoredMessagesState(
        index, CHUNKS, (stored_message(sequence) for sequence in (97, 98, 99))
    )
    before = len(CHUNK_RUNS)
    messages = all_messages(state, after_sequence=50, keep_chunks=keep_chunks)
    assert [message.sequence for message in messages] == list(range(51, 100))
    assert len(CHUNK_RUNS) == before + kept
    assert all_messages(state) == tuple(stored_message(sequence) for sequence in range(1, 100))


def test_a_run_is_charged_the_memory_it_keeps_alive_not_its_weight() -> None:
    # INDEX's run weighs 99 (96 messages in 3 chunks of 1 byte), yet keeps 96 decoded
    # messages alive: far more than 99 bytes.
    weighed = ChunkRuns(most_weight=1000, measured=False)
    weighed.get("s0", INDEX, CHUNKS)
    assert len(weighed) == 1
    measured = ChunkRuns(most_weight=1000)
    measured.get("s0", INDEX, CHUNKS)
    assert (len(measured), measured.held) == (0, 0)
    roomy = ChunkRuns()
    run = roomy.get("s0", INDEX, CHUNKS)
    assert roomy.held > 1000
    assert roomy.get("s0", INDEX, CHUNKS) is run
    bounded = ChunkRuns(most_weight=roomy.held * 3 // 2)  # room for one run, not two
    first = bounded.get("s0", INDEX, CHUNKS)
    bounded.get("s1", message_index((1, 32), (33, 64), (65, 96)), CHUNKS)
    assert len(bounded) == 1
    assert bounded.get("s0", INDEX, CHUNKS) is not first
