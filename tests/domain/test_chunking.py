"""The store-messages commit plan: window rollover into chunks within the spec's limits."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.chunking import (
    StoreMessagesPlan,
    encoded_chunk_size,
    is_oversized_message,
    plan_store_messages,
)
from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex, MessageChunkInfo
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.windowing import (
    MAX_CHUNK_BYTES_PER_COMMIT,
    MAX_CHUNKS_PER_COMMIT,
    MessageStorageOptions,
    message_sequence_key,
)
from dex_agents.domain.wire import json_size

MIB = 1024 * 1024
DEFAULTS = MessageStorageOptions()


def _message(sequence: int, text: str = "hi") -> AgentMessage:
    return AgentMessage(
        sequence=sequence,
        turn_id=f"turn-{sequence}",
        role=MessageRole.USER,
        framework_item='{"type":"message"}',
        text=text,
    )


def _messages(first: int, count: int) -> list[AgentMessage]:
    return [_message(sequence) for sequence in range(first, first + count)]


def _sized(sizes: dict[int, int], default: int = 100) -> Callable[[AgentMessage], int]:
    return lambda message: sizes.get(message.sequence, default)


def _ranges(plan: StoreMessagesPlan) -> list[tuple[int, int]]:
    return [(chunk.first_sequence, chunk.last_sequence) for chunk in plan.chunks]


def _sequences(messages: Sequence[AgentMessage]) -> list[int]:
    return [message.sequence for message in messages]


@settings(max_examples=50, deadline=None)
@given(texts=st.lists(st.text(max_size=40), min_size=1, max_size=5), first=st.integers(1, 10**6))
def test_encoded_chunk_size_is_the_chunk_json_size(texts: list[str], first: int) -> None:
    messages = tuple(_message(first + offset, text) for offset, text in enumerate(texts))
    chunk = AgentMessageChunk(
        first_sequence=first, last_sequence=messages[-1].sequence, messages=messages
    )
    sizes = [json_size(message) for message in messages]
    assert encoded_chunk_size(first, messages[-1].sequence, sizes) == json_size(chunk)


@pytest.mark.parametrize(
    ("sequence", "size", "limit", "oversized"),
    [
        (1, MIB - 52, MIB, False),  # 50 bytes of keys + 2 one-digit sequences
        (1, MIB - 51, MIB, True),
        (100, MIB - 56, MIB, False),
        (1, 2 * MIB, MIB, True),
        (1, 2 * MIB, 8 * MIB, False),
    ],
)
def test_oversized_means_a_chunk_of_the_message_alone_exceeds_the_limit(
    sequence: int, size: int, limit: int, oversized: bool
) -> None:
    assert is_oversized_message(sequence, size, limit) is oversized


def test_a_small_window_writes_no_chunk_and_keeps_the_unset_index() -> None:
    plan = plan_store_messages(
        index=None, window=_messages(1, 3), new_messages=_messages(4, 2), options=DEFAULTS
    )
    assert plan.chunks == ()
    assert plan.deleted_window_keys == ()
    assert _sequences(plan.window_messages) == [4, 5]
    assert plan.index is None
    assert plan.index_changed is False


def test_the_same_index_object_returns_when_no_chunk_is_written() -> None:
    index = AgentMessageIndex(window_first_sequence=33)
    plan = plan_store_messages(
        index=index, window=_messages(33, 40), new_messages=_messages(73, 1), options=DEFAULTS
    )
    assert plan.index is index
    assert plan.index_changed is False


@pytest.mark.parametrize(
    ("window", "new", "chunks", "window_first"),
    [
        (64, 0, [], 1),  # exactly message_window_size: nothing moves
        (63, 1, [], 1),
        (64, 1, [(1, 32)], 33),  # 65 > 64: the oldest 32 move
        (60, 10, [(1, 32)], 33),  # 70 - 32 = 38 left
        (0, 97, [(1, 32), (33, 64)], 65),  # 97 - 64 = 33 left
        (0, 129, [(1, 32), (33, 64), (65, 96)], 97),  # 33 left
        (0, 200, [(1, 32), (33, 64), (65, 96), (97, 128)], 129),  # 4 chunks per commit, 72 left
        (300, 1, [(1, 32), (33, 64), (65, 96), (97, 128)], 129),  # a 0.1.0 window drains
    ],
)
def test_rollover_moves_full_chunks_of_32_while_the_window_exceeds_64(
    window: int, new: int, chunks: list[tuple[int, int]], window_first: int
) -> None:
    plan = plan_store_messages(
        index=None,
        window=_messages(1, window),
        new_messages=_messages(window + 1, new),
        options=DEFAULTS,
        message_size=_sized({}),
    )
    assert _ranges(plan) == chunks
    expected_first = window_first if chunks else 1
    if chunks:
        assert plan.index is not None
        assert plan.index.window_first_sequence == expected_first
        assert plan.index.first_sequence == 1
        assert [
            (info.first_sequence, info.last_sequence, info.message_count)
            for info in plan.index.chunks
        ] == [(first, last, last - first + 1) for first, last in chunks]
    moved_window = min(window, expected_first - 1)
    assert plan.deleted_window_keys == tuple(
        message_sequence_key(sequence) for sequence in range(1, moved_window + 1)
    )
    assert _sequences(plan.window_messages) == list(
        range(max(expected_first, window + 1), window + new + 1)
    )


def test_a_0_1_0_window_leaves_over_several_commits() -> None:
    index: AgentMessageIndex | None = None
    window = _messages(1, 300)
    commits = 0
    while True:
        new = [_message(len(window) + (index.window_first_sequence if index else 1))]
        plan = plan_store_messages(index=index, window=window, new_messages=new, options=DEFAULTS)
        commits += 1
        assert len(plan.chunks) <= MAX_CHUNKS_PER_COMMIT
        moved = {
            chunk_message.sequence for chunk in plan.chunks for chunk_message in chunk.messages
        }
        window = [message for message in window if message.sequence not in moved]
        window += list(plan.window_messages)
        index = plan.index
        if len(window) <= DEFAULTS.message_window_size:
            break
    # 301 messages: 4 chunks leave 173; with one more, 4 chunks leave 46.
    assert commits == 2
    assert index is not None
    assert len(index.chunks) == 8
    assert index.window_first_sequence == 257
    assert len(window) == 302 - 8 * 32


def test_an_existing_index_gets_the_new_chunks_appended() -> None:
    old = MessageChunkInfo(first_sequence=101, last_sequence=132, message_count=32, size_bytes=900)
    index = AgentMessageIndex(chunks=(old,), window_first_sequence=133, first_sequence=101)
    plan = plan_store_messages(
        index=index,
        window=_messages(133, 64),
        new_messages=_messages(197, 1),
        options=DEFAULTS,
        message_size=_sized({}, default=10),
    )
    assert plan.index == AgentMessageIndex(
        chunks=(
            old,
            MessageChunkInfo(
                first_sequence=133,
                last_sequence=164,
                message_count=32,
                size_bytes=50 + 3 + 3 + 32 * 10 + 31,
            ),
        ),
        window_first_sequence=165,
        first_sequence=101,
    )
    assert plan.chunk_keys == ("000000000133",)


def test_the_byte_limit_closes_a_chunk_early() -> None:
    # 400 KiB messages: two fit in 1 MiB, three do not.
    plan = plan_store_messages(
        index=None,
        window=_messages(1, 64),
        new_messages=_messages(65, 1),
        options=DEFAULTS,
        message_size=_sized({}, default=400 * 1024),
    )
    assert _ranges(plan) == [(1, 2)]
    assert plan.index is not None
    assert plan.index.chunks[0].size_bytes == 50 + 1 + 1 + 2 * 400 * 1024 + 1
    assert plan.index.chunks[0].size_bytes <= MIB


def test_an_oversized_new_message_skips_the_window_with_the_older_messages_moved_first() -> None:
    plan = plan_store_messages(
        index=None,
        window=_messages(1, 40),
        new_messages=_messages(41, 3),
        options=DEFAULTS,
        message_size=_sized({42: 2 * MIB}),
    )
    assert _ranges(plan) == [(1, 32), (33, 41), (42, 42)]
    assert _sequences(plan.window_messages) == [43]
    assert len(plan.deleted_window_keys) == 40
    assert plan.index is not None
    assert plan.index.window_first_sequence == 43
    assert plan.index.chunks[2].size_bytes == 50 + 2 + 2 + 2 * MIB


@pytest.mark.parametrize(
    ("window_count", "new_count", "sized"),
    [
        (40, 3, [41, 42, 43]),  # room in the window: only the new messages are sized
        (62, 2, [63, 64]),  # exactly full (64 messages)
        (63, 2, list(range(1, 66))),  # one over: the window is packed
    ],
)
def test_a_commit_sizes_the_window_only_when_messages_may_move(
    window_count: int, new_count: int, sized: list[int]
) -> None:
    seen: list[int] = []

    def size(message: AgentMessage) -> int:
        seen.append(message.sequence)
        return 100

    plan = plan_store_messages(
        index=None,
        window=_messages(1, window_count),
        new_messages=_messages(window_count + 1, new_count),
        options=DEFAULTS,
        message_size=size,
    )
    assert seen == sized
    assert bool(plan.chunks) is (window_count + new_count > DEFAULTS.message_window_size)


def test_an_oversized_message_chunk_is_the_real_json_of_a_large_message() -> None:
    large = _message(3, "x" * (MIB + 10))
    plan = plan_store_messages(
        index=None, window=_messages(1, 2), new_messages=[large], options=DEFAULTS
    )
    assert _ranges(plan) == [(1, 2), (3, 3)]
    assert plan.window_messages == ()
    assert plan.index is not None
    assert [info.size_bytes for info in plan.index.chunks] == [
        json_size(chunk) for chunk in plan.chunks
    ]


def test_an_oversized_message_that_cannot_move_within_the_caps_enters_the_window() -> None:
    # 200 older messages need more than 4 chunks before it, so it waits in the window.
    plan = plan_store_messages(
        index=None,
        window=_messages(1, 200),
        new_messages=_messages(201, 1),
        options=DEFAULTS,
        message_size=_sized({201: 2 * MIB}),
    )
    assert _ranges(plan) == [(1, 32), (33, 64), (65, 96), (97, 128)]
    assert _sequences(plan.window_messages) == [201]


def test_the_byte_cap_stops_at_8_mib_per_commit() -> None:
    # Oversized 3 MiB messages left in a 0.1.0 window: 3 + 3 MiB move, a third would pass 8 MiB.
    plan = plan_store_messages(
        index=None,
        window=_messages(1, 70),
        new_messages=_messages(71, 1),
        options=DEFAULTS,
        message_size=_sized({1: 3 * MIB, 2: 3 * MIB, 3: 3 * MIB}),
    )
    assert _ranges(plan) == [(1, 1), (2, 2)]
    assert plan.index is not None
    assert sum(info.size_bytes for info in plan.index.chunks) <= MAX_CHUNK_BYTES_PER_COMMIT


def test_the_first_chunk_of_a_commit_always_moves() -> None:
    plan = plan_store_messages(
        index=None,
        window=_messages(1, 65),
        new_messages=[],
        options=DEFAULTS,
        message_size=_sized({1: 9 * MIB}),
    )
    assert _ranges(plan) == [(1, 1)]


def test_a_larger_chunk_byte_limit_holds_more() -> None:
    options = MessageStorageOptions(message_chunk_max_bytes=8 * MIB)
    plan = plan_store_messages(
        index=None,
        window=_messages(1, 64),
        new_messages=_messages(65, 1),
        options=options,
        message_size=_sized({}, default=2 * MIB),
    )
    # Three 2 MiB messages fit in 8 MiB; the next chunk would take the commit past 8 MiB.
    assert _ranges(plan) == [(1, 3)]


@pytest.mark.parametrize(
    ("index", "window", "new", "message"),
    [
        (None, [2, 3], [4], "window message 0 has sequence 2, expected 1"),
        (AgentMessageIndex(window_first_sequence=5), [5, 7], [], "window message 1 has sequence 7"),
        (None, [1, 2], [4], "new message 0 has sequence 4, expected 3"),
        (None, [], [2], "new message 0 has sequence 2, expected 1"),
    ],
)
def test_sequences_that_do_not_line_up_are_refused(
    index: AgentMessageIndex | None, window: list[int], new: list[int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        plan_store_messages(
            index=index,
            window=[_message(sequence) for sequence in window],
            new_messages=[_message(sequence) for sequence in new],
            options=DEFAULTS,
        )


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="message 2 has a negative size -1"):
        plan_store_messages(
            index=None,
            window=_messages(1, 1),
            new_messages=_messages(2, 1),
            options=DEFAULTS,
            message_size=_sized({2: -1}),
        )


_OPTIONS = st.builds(
    MessageStorageOptions,
    message_window_size=st.integers(1, 8),
    message_chunk_size=st.integers(1, 5),
    message_chunk_max_bytes=st.sampled_from([120, 400, MIB, 8 * MIB]),
    retained_message_limit=st.none(),
)
_SIZES = st.one_of(st.integers(0, 300), st.sampled_from([MIB, 3 * MIB, 9 * MIB]))


@settings(max_examples=100, deadline=None)
@given(
    options=_OPTIONS,
    legacy=st.lists(_SIZES, max_size=30),
    commits=st.lists(st.lists(_SIZES, max_size=12), max_size=12),
)
def test_commits_keep_every_message_once_in_order_within_the_limits(
    options: MessageStorageOptions, legacy: list[int], commits: list[list[int]]
) -> None:
    sizes = dict(enumerate(legacy, start=1))
    index: AgentMessageIndex | None = None
    window = {sequence: _message(sequence) for sequence in sizes}  # a 0.1.0 session
    chunks: dict[str, AgentMessageChunk] = {}
    for commit in commits:
        first_new = len(sizes) + 1
        sizes.update(enumerate(commit, start=first_new))
        new = _messages(first_new, len(commit))
        plan = plan_store_messages(
            index=index,
            window=[window[sequence] for sequence in sorted(window)],
            new_messages=new,
            options=options,
            message_size=_sized(sizes),
        )
        assert len(plan.chunks) <= MAX_CHUNKS_PER_COMMIT
        infos = plan.index.chunks[len(index.chunks) if index else 0 :] if plan.index else ()
        assert len(infos) == len(plan.chunks)
        moved = sum(info.size_bytes for info in infos)
        assert moved <= MAX_CHUNK_BYTES_PER_COMMIT or len(plan.chunks) == 1
        assert plan.index_changed is bool(plan.chunks)
        if not plan.chunks:
            assert plan.index is index
        for key in plan.deleted_window_keys:
            del window[int(key)]
        window.update((message.sequence, message) for message in plan.window_messages)
        chunks.update(zip(plan.chunk_keys, plan.chunks, strict=True))
        index = plan.index
        if len(window) > options.message_window_size:
            assert plan.chunks, "an overfull window moves at least one chunk"
        for message in plan.window_messages:
            oversized = is_oversized_message(
                message.sequence, sizes[message.sequence], options.message_chunk_max_bytes
            )
            if oversized and message.sequence == min(window):
                # Everything older moved, so the caps stopped it: 4 chunks, or past 8 MiB.
                alone = encoded_chunk_size(
                    message.sequence, message.sequence, [sizes[message.sequence]]
                )
                assert len(plan.chunks) == MAX_CHUNKS_PER_COMMIT or (
                    moved + alone > MAX_CHUNK_BYTES_PER_COMMIT
                )

    stored: list[int] = []
    for info in index.chunks if index else ():
        chunk = chunks[message_sequence_key(info.first_sequence)]
        sequences = _sequences(chunk.messages)
        assert sequences == list(range(info.first_sequence, info.last_sequence + 1))
        assert (chunk.first_sequence, chunk.last_sequence) == (
            info.first_sequence,
            info.last_sequence,
        )
        assert info.message_count == len(sequences) <= options.message_chunk_size
        assert info.size_bytes == encoded_chunk_size(
            info.first_sequence, info.last_sequence, [sizes[s] for s in sequences]
        )
        assert info.size_bytes <= options.message_chunk_max_bytes or len(sequences) == 1
        stored += sequences
    assert set(chunks) == {
        message_sequence_key(info.first_sequence) for info in (index.chunks if index else ())
    }
    window_first = index.window_first_sequence if index else 1
    assert sorted(window) == list(range(window_first, len(sizes) + 1))
    stored += sorted(window)
    assert stored == list(range(1, len(sizes) + 1))
