"""Reading stored messages back: pages, snapshots, and the chunks RunModel loads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex, MessageChunkInfo
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.paging import (
    MAX_PAGE_LIMIT,
    MIN_PAGE_LIMIT,
    SNAPSHOT_MESSAGE_LIMIT,
    chunked_messages,
    chunks_to_load_for_model,
    clamp_page_limit,
    deleted_before_sequence,
    page_agent_messages,
    snapshot_floor,
    snapshot_messages,
    stored_messages,
    with_window,
)
from dex_agents.domain.requests import ListAgentMessagesRequest


def _message(sequence: int) -> AgentMessage:
    return AgentMessage(
        sequence=sequence, turn_id="turn-1", role=MessageRole.USER, framework_item="{}"
    )


def _chunk(first: int, last: int) -> AgentMessageChunk:
    return AgentMessageChunk(
        first_sequence=first,
        last_sequence=last,
        messages=tuple(_message(sequence) for sequence in range(first, last + 1)),
    )


def _info(first: int, last: int) -> MessageChunkInfo:
    return MessageChunkInfo(
        first_sequence=first, last_sequence=last, message_count=last - first + 1, size_bytes=1
    )


def _sequences(messages: tuple[AgentMessage, ...]) -> list[int]:
    return [message.sequence for message in messages]


# Retention deleted 1..100; chunks 101..132 and 133..164 are kept; the window is 165..300.
INDEX = AgentMessageIndex(
    chunks=(_info(101, 132), _info(133, 164)), window_first_sequence=165, first_sequence=101
)
CHUNKS = [_chunk(133, 164), _chunk(101, 132)]
WINDOW = [_message(sequence) for sequence in range(300, 164, -1)]
STORED = stored_messages(INDEX, CHUNKS, WINDOW)


@pytest.mark.parametrize(
    ("limit", "clamped"), [(0, 1), (-5, 1), (1, 1), (100, 100), (200, 200), (201, 200), (500, 200)]
)
def test_limit_is_clamped_to_1_through_200(limit: int, clamped: int) -> None:
    assert (MIN_PAGE_LIMIT, MAX_PAGE_LIMIT, SNAPSHOT_MESSAGE_LIMIT) == (1, 200, 200)
    assert clamp_page_limit(limit) == clamped


def test_stored_messages_are_the_chunks_then_the_window_in_order() -> None:
    assert _sequences(STORED) == list(range(101, 301))


def test_a_0_1_0_session_is_all_window() -> None:
    window = [_message(sequence) for sequence in (3, 1, 2)]
    assert _sequences(stored_messages(None, [], window)) == [1, 2, 3]


@pytest.mark.parametrize(
    ("order", "error"),
    [
        ((1, 2, 3), None),
        ((2, 3, 1), None),
        ((1, 2, 2, 3), "expected sequence 3, found 2"),
        ((3, 1), "expected sequence 2, found 3"),
        ((2, 3), "expected sequence 1, found 2"),
    ],
)
def test_a_window_in_any_order_is_sorted_and_checked(
    order: tuple[int, ...], error: str | None
) -> None:
    window = [_message(sequence) for sequence in order]
    if error is None:
        assert _sequences(stored_messages(None, [], window)) == sorted(order)
    else:
        with pytest.raises(ValueError, match=error):
            stored_messages(None, [], window)


def test_window_messages_before_the_window_start_are_ignored() -> None:
    index = AgentMessageIndex(chunks=(_info(1, 2),), window_first_sequence=3)
    stored = stored_messages(index, [_chunk(1, 2)], [_message(2), _message(3)])
    assert _sequences(stored) == [1, 2, 3]


def test_a_missing_chunk_is_refused() -> None:
    with pytest.raises(ValueError, match="chunk 000000000133 listed in AgentMessageIndex"):
        stored_messages(INDEX, [_chunk(101, 132)], WINDOW)


def test_a_gap_is_refused() -> None:
    with pytest.raises(ValueError, match="expected sequence 170, found 171"):
        stored_messages(INDEX, CHUNKS, [m for m in WINDOW if m.sequence != 170])


def test_a_gap_between_chunks_is_refused() -> None:
    index = AgentMessageIndex(
        chunks=(_info(101, 132), _info(134, 164)), window_first_sequence=165, first_sequence=101
    )
    with pytest.raises(ValueError, match="expected sequence 133, found 134"):
        stored_messages(index, [_chunk(101, 132), _chunk(134, 164)], WINDOW)


@pytest.mark.parametrize("sequences", [[1, 3], [2, 3], [1, 2, 3, 4], [1, 3, 2], []])
def test_a_chunk_holds_exactly_its_consecutive_messages(sequences: list[int]) -> None:
    messages = tuple(_message(sequence) for sequence in sequences)
    with pytest.raises(ValueError, match=r"chunk 1\.\.3 must hold exactly those messages"):
        AgentMessageChunk(first_sequence=1, last_sequence=3, messages=messages)
    assert _chunk(1, 3).messages[-1].sequence == 3


def test_messages_after_a_floor_inside_a_chunk_start_after_it() -> None:
    assert _sequences(stored_messages(INDEX, CHUNKS, WINDOW, after_sequence=150))[:3] == [
        151,
        152,
        153,
    ]
    assert _sequences(stored_messages(INDEX, CHUNKS, WINDOW, after_sequence=150))[-1] == 300


def test_a_floor_inside_the_window_leaves_the_window_messages_after_it() -> None:
    chunked = chunked_messages(INDEX, CHUNKS, after_sequence=250)
    assert (chunked.messages, chunked.next_sequence, chunked.window_from) == ((), 251, 251)
    assert _sequences(with_window(chunked, WINDOW)) == list(range(251, 301))
    assert with_window(chunked, WINDOW) == stored_messages(
        INDEX, CHUNKS, WINDOW, after_sequence=250
    )


@pytest.mark.parametrize(
    ("request_", "sequences", "has_more"),
    [
        (ListAgentMessagesRequest(), list(range(201, 301)), True),
        (ListAgentMessagesRequest(limit=500), list(range(101, 301)), False),
        (ListAgentMessagesRequest(limit=0), [300], True),
        (ListAgentMessagesRequest(before_sequence=201, limit=50), list(range(151, 201)), True),
        (ListAgentMessagesRequest(before_sequence=151, limit=50), list(range(101, 151)), False),
        (ListAgentMessagesRequest(before_sequence=120, limit=50), list(range(101, 120)), False),
        (ListAgentMessagesRequest(before_sequence=101), [], False),
        (ListAgentMessagesRequest(before_sequence=5), [], False),
        (ListAgentMessagesRequest(after_sequence=0, limit=3), [101, 102, 103], True),
        (ListAgentMessagesRequest(after_sequence=150, limit=2), [151, 152], True),
        (ListAgentMessagesRequest(after_sequence=290, limit=20), list(range(291, 301)), False),
        (ListAgentMessagesRequest(after_sequence=300), [], False),
    ],
)
def test_pages(request_: ListAgentMessagesRequest, sequences: list[int], has_more: bool) -> None:
    page = page_agent_messages(request_, STORED, INDEX)
    assert _sequences(page.messages) == sequences
    assert page.has_more is has_more
    assert page.deleted_before_sequence == 101


def test_both_directions_at_once_are_refused() -> None:
    with pytest.raises(ValueError, match="set before_sequence or after_sequence, not both"):
        page_agent_messages(
            ListAgentMessagesRequest(before_sequence=5, after_sequence=1), STORED, INDEX
        )


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (None, None),
        (AgentMessageIndex(), None),
        (AgentMessageIndex(chunks=(_info(1, 32),), window_first_sequence=33), None),
        (INDEX, 101),
    ],
)
def test_deleted_before_sequence_is_set_once_retention_deleted(
    index: AgentMessageIndex | None, expected: int | None
) -> None:
    assert deleted_before_sequence(index) == expected


def test_an_empty_session_has_an_empty_page() -> None:
    page = page_agent_messages(ListAgentMessagesRequest(), (), None)
    assert (page.messages, page.has_more, page.deleted_before_sequence) == ((), False, None)


@pytest.mark.parametrize(("count", "first"), [(0, None), (5, 1), (200, 1), (201, 2), (450, 251)])
def test_snapshot_holds_the_last_200_messages(count: int, first: int | None) -> None:
    messages = tuple(_message(sequence) for sequence in range(1, count + 1))
    snapshot = snapshot_messages(messages)
    assert len(snapshot) == min(count, 200)
    assert (snapshot[0].sequence if snapshot else None) == first


@pytest.mark.parametrize(
    ("last_sequence", "floor"), [(0, None), (5, None), (200, None), (201, 1), (450, 250)]
)
def test_a_snapshot_reads_only_the_messages_it_shows(last_sequence: int, floor: int | None) -> None:
    assert snapshot_floor(last_sequence) == floor
    messages = tuple(_message(sequence) for sequence in range(1, last_sequence + 1))
    # Sixteen-message chunks, the last of them partly in the window.
    chunks = [_chunk(first, first + 15) for first in range(1, last_sequence - 15, 16)]
    in_chunks = chunks[-1].last_sequence if chunks else 0
    index = AgentMessageIndex(
        chunks=tuple(_info(chunk.first_sequence, chunk.last_sequence) for chunk in chunks),
        window_first_sequence=in_chunks + 1,
        first_sequence=1,
    )
    window = messages[in_chunks:]
    read = stored_messages(index, chunks, window, after_sequence=floor)
    assert snapshot_messages(read) == snapshot_messages(messages)
    skipped = [chunk for chunk in chunks if floor is not None and chunk.last_sequence <= floor]
    needed = [chunk for chunk in chunks if chunk not in skipped]
    assert stored_messages(index, needed, window, after_sequence=floor) == read


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 450), first=st.integers(1, 50), limit=st.integers(-3, 260))
def test_paging_backwards_visits_every_message_once(count: int, first: int, limit: int) -> None:
    messages = tuple(_message(sequence) for sequence in range(first, first + count))
    index = AgentMessageIndex(window_first_sequence=first, first_sequence=first)
    seen: list[int] = []
    request = ListAgentMessagesRequest(limit=limit)
    while True:
        page = page_agent_messages(request, messages, index)
        assert len(page.messages) <= clamp_page_limit(limit)
        seen = _sequences(page.messages) + seen
        if not page.has_more:
            break
        request = ListAgentMessagesRequest(before_sequence=page.messages[0].sequence, limit=limit)
    assert seen == list(range(first, first + count))


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 450), limit=st.integers(1, 200))
def test_paging_forwards_visits_every_message_once(count: int, limit: int) -> None:
    messages = tuple(_message(sequence) for sequence in range(1, count + 1))
    seen: list[int] = []
    after = 0
    while True:
        page = page_agent_messages(
            ListAgentMessagesRequest(after_sequence=after, limit=limit), messages, None
        )
        seen += _sequences(page.messages)
        if not page.has_more:
            break
        after = page.messages[-1].sequence
    assert seen == list(range(1, count + 1))


@pytest.mark.parametrize(
    ("compaction", "summary_last", "loaded"),
    [
        (False, None, [101, 133]),  # without compaction, every chunk
        (False, 140, [101, 133]),  # a summary left by an earlier policy does not matter
        (True, None, [101, 133]),  # compaction before the first summary
        (True, 131, [101, 133]),  # 132 is after the summary
        (True, 132, [133]),
        (True, 164, []),
        (True, 250, []),
    ],
)
def test_run_model_loads_only_chunks_after_the_summary_with_compaction(
    compaction: bool, summary_last: int | None, loaded: list[int]
) -> None:
    chunks = chunks_to_load_for_model(
        INDEX, compaction_enabled=compaction, summary_last_sequence=summary_last
    )
    assert [chunk.first_sequence for chunk in chunks] == loaded


def test_no_index_loads_no_chunk() -> None:
    assert chunks_to_load_for_model(None, compaction_enabled=True, summary_last_sequence=3) == ()


@pytest.mark.parametrize(
    ("after", "loaded_firsts", "expected"),
    [
        (None, [101, 133], list(range(101, 301))),
        (140, [133], list(range(141, 301))),
        (164, [], list(range(165, 301))),
        (280, [], list(range(281, 301))),
    ],
)
def test_stored_messages_after_the_summary_need_only_the_later_chunks(
    after: int | None, loaded_firsts: list[int], expected: list[int]
) -> None:
    loaded = [chunk for chunk in CHUNKS if chunk.first_sequence in loaded_firsts]
    assert _sequences(stored_messages(INDEX, loaded, WINDOW, after_sequence=after)) == expected
