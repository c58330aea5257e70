"""Retention: the oldest chunks the summary covers go, the newest messages always stay."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.message_index import AgentMessageIndex, MessageChunkInfo
from dex_agents.domain.retention import plan_retention
from dex_agents.domain.windowing import DEFAULT_RETAINED_MESSAGE_LIMIT


def _chunk(first: int, last: int) -> MessageChunkInfo:
    return MessageChunkInfo(
        first_sequence=first, last_sequence=last, message_count=last - first + 1, size_bytes=1
    )


def _index(*ranges: tuple[int, int], window_first: int | None = None) -> AgentMessageIndex:
    chunks = tuple(_chunk(first, last) for first, last in ranges)
    return AgentMessageIndex(
        chunks=chunks,
        window_first_sequence=window_first or chunks[-1].last_sequence + 1,
        first_sequence=chunks[0].first_sequence,
    )


# Chunks of 32 from 1 to 1,280; the window starts at 1,281.
FORTY_CHUNKS = _index(*((first, first + 31) for first in range(1, 1281, 32)))


@pytest.mark.parametrize(
    ("summary_last", "last_sequence", "limit", "deleted", "first_sequence"),
    [
        (None, 5_000, 1_000, 0, 1),  # no compaction, nothing deleted
        (1_280, 5_000, None, 0, 1),  # retained_message_limit=None keeps everything
        (31, 5_000, 1_000, 0, 1),  # the first chunk ends after the summary
        (32, 5_000, 1_000, 1, 33),
        (100, 5_000, 1_000, 3, 97),  # 97..128 holds messages after the summary
        (1_280, 1_320, 1_000, 10, 321),  # 1,320 - 320 = 1,000 stored after chunk 10
        (1_280, 1_319, 1_000, 9, 289),  # one short of 1,000 after chunk 10
        (1_280, 1_100, 1_000, 3, 97),
        (1_280, 1_300, 100, 37, 1_185),  # 1,300 - 1,184 = 116 after chunk 37, 84 after 38
        (1_280, 10_000, 1_000, 40, 1_281),  # every chunk, paging starts at the window
    ],
)
def test_retention_deletes_the_oldest_covered_chunks(
    summary_last: int | None,
    last_sequence: int,
    limit: int | None,
    deleted: int,
    first_sequence: int,
) -> None:
    plan = plan_retention(
        FORTY_CHUNKS,
        summary_last_sequence=summary_last,
        last_sequence=last_sequence,
        retained_message_limit=limit,
    )
    assert len(plan.deleted_chunks) == deleted
    assert plan.deleted_chunks == FORTY_CHUNKS.chunks[:deleted]
    assert plan.index is not None
    assert plan.index.first_sequence == first_sequence
    assert plan.index.chunks == FORTY_CHUNKS.chunks[deleted:]
    assert plan.index.window_first_sequence == 1_281
    assert plan.index_changed is bool(deleted)
    if not deleted:
        assert plan.index is FORTY_CHUNKS


def test_the_default_limit_is_1000() -> None:
    assert DEFAULT_RETAINED_MESSAGE_LIMIT == 1_000


def test_deleted_chunk_keys_are_sequence_keys() -> None:
    plan = plan_retention(
        _index((1, 32), (33, 64)),
        summary_last_sequence=64,
        last_sequence=2_000,
        retained_message_limit=1_000,
    )
    assert plan.deleted_chunk_keys == ("000000000001", "000000000033")


def test_no_index_means_nothing_to_delete() -> None:
    plan = plan_retention(
        None, summary_last_sequence=500, last_sequence=5_000, retained_message_limit=1
    )
    assert (plan.deleted_chunks, plan.index, plan.index_changed) == ((), None, False)


@pytest.mark.parametrize(
    ("summary_last", "last_sequence", "limit", "deleted"),
    [
        (30, 45, 26, 1),  # 35 stored after (1,10), 25 after (11,20), 15 after (21,30)
        (30, 45, 25, 2),
        (30, 45, 36, 0),  # the first chunk stays, so nothing after it goes
        (15, 100, 1, 1),  # (11,20) ends after the summary; (21,30) is newer still
    ],
)
def test_retention_stops_at_the_first_chunk_it_keeps(
    summary_last: int, last_sequence: int, limit: int, deleted: int
) -> None:
    index = _index((1, 10), (11, 20), (21, 30))
    plan = plan_retention(
        index,
        summary_last_sequence=summary_last,
        last_sequence=last_sequence,
        retained_message_limit=limit,
    )
    assert plan.deleted_chunks == index.chunks[:deleted]
    assert plan.index is not None
    assert plan.index.chunks == index.chunks[deleted:]
    assert plan.index.first_sequence == index.chunks[deleted].first_sequence


def test_retention_never_deletes_past_a_kept_chunk_whatever_follows_it() -> None:
    # Both conditions only get harder for newer chunks of a well-formed index, so a newer
    # chunk can qualify only in an index whose chunks are out of order. Even there, the
    # chunk after the first kept one stays: retention deletes a prefix, never a later chunk.
    chunks = (_chunk(1, 10), _chunk(21, 30), _chunk(11, 20))
    index = AgentMessageIndex(chunks=chunks, window_first_sequence=31, first_sequence=1)
    plan = plan_retention(
        index, summary_last_sequence=30, last_sequence=45, retained_message_limit=25
    )
    # (11,20) alone has 25 messages after it and is covered, yet (21,30) before it is kept.
    assert plan.deleted_chunks == chunks[:1]
    assert plan.index is not None
    assert plan.index.chunks == chunks[1:]


@pytest.mark.parametrize(
    ("limit", "last_sequence", "message"),
    [
        (0, 10, "retained_message_limit must be None or at least 1, not 0"),
        (10, -1, "last_sequence must be at least 0, not -1"),
    ],
)
def test_bad_input_is_refused(limit: int, last_sequence: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_retention(
            FORTY_CHUNKS,
            summary_last_sequence=10,
            last_sequence=last_sequence,
            retained_message_limit=limit,
        )


@settings(max_examples=100, deadline=None)
@given(
    chunk_sizes=st.lists(st.integers(1, 40), min_size=1, max_size=20),
    window=st.integers(0, 100),
    summary_offset=st.integers(0, 900),
    limit=st.integers(1, 400),
)
def test_retention_never_deletes_after_the_summary_or_below_the_limit(
    chunk_sizes: list[int], window: int, summary_offset: int, limit: int
) -> None:
    ranges: list[tuple[int, int]] = []
    first = 1
    for size in chunk_sizes:
        ranges.append((first, first + size - 1))
        first += size
    index = _index(*ranges)
    last_sequence = first - 1 + window
    summary_last = min(summary_offset, last_sequence)
    plan = plan_retention(
        index,
        summary_last_sequence=summary_last,
        last_sequence=last_sequence,
        retained_message_limit=limit,
    )
    assert plan.index is not None
    for chunk in plan.deleted_chunks:
        assert chunk.last_sequence <= summary_last
        assert last_sequence - chunk.last_sequence >= limit
    kept = plan.index.chunks
    assert (*plan.deleted_chunks, *kept) == index.chunks
    # The oldest kept chunk was not deletable, so retention went as far as it may.
    if kept:
        assert kept[0].last_sequence > summary_last or last_sequence - kept[0].last_sequence < limit
        assert plan.index.first_sequence == kept[0].first_sequence
    else:
        assert plan.index.first_sequence == plan.index.window_first_sequence
    # The newest `limit` stored messages and everything after the summary stay.
    assert plan.index.first_sequence <= max(last_sequence - limit + 1, 1)
    assert plan.index.first_sequence <= summary_last + 1
