"""Reading stored messages back: ``list_agent_messages`` pages, snapshots, and model loads.

Stored messages are the kept chunks, oldest first, then the window. Retention
may have deleted the oldest chunks: paging then ends at
``AgentMessageIndex.first_sequence``, and every page says where the deleted
messages end in ``deleted_before_sequence``.
"""

from __future__ import annotations

import itertools
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence

import attrs

from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex, MessageChunkInfo
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.requests import AgentMessagesPage, ListAgentMessagesRequest
from dex_agents.domain.windowing import message_sequence_key

MIN_PAGE_LIMIT = 1
"""The smallest ``ListAgentMessagesRequest.limit`` after clamping."""

MAX_PAGE_LIMIT = 200
"""The largest ``ListAgentMessagesRequest.limit`` after clamping."""

SNAPSHOT_MESSAGE_LIMIT = 200
"""``get_agent_snapshot`` returns the last 200 stored messages."""


def clamp_page_limit(limit: int) -> int:
    """``limit`` clamped to 1..200."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    return max(MIN_PAGE_LIMIT, min(MAX_PAGE_LIMIT, limit))


def deleted_before_sequence(index: AgentMessageIndex | None) -> int | None:
    """Where deleted messages end: ``first_sequence`` once retention deleted any, else ``None``."""
    if index is None or index.first_sequence <= 1:
        return None
    return index.first_sequence


@attrs.frozen
class ChunkedMessages:
    """The kept chunks' messages after a floor, checked consecutive (``chunked_messages``)."""

    messages: tuple[AgentMessage, ...]
    next_sequence: int
    """The sequence the window's first message after the floor must have."""
    window_from: int
    """The lowest sequence of a window message that follows: the window's start, or the
    floor's next when the floor is past it (a window message before it is ignored)."""


def chunked_messages(
    index: AgentMessageIndex | None,
    chunks: Iterable[AgentMessageChunk],
    *,
    after_sequence: int | None = None,
) -> ChunkedMessages:
    """The messages of the chunks ``index`` lists, in sequence order, after ``after_sequence``,
    and where the window's part must go on from (``with_window``).

    The first part of ``stored_messages``: it depends on the kept chunks alone,
    which never change at their keys, so a caller may keep its result while the
    index and the chunks it was given are the same objects. Raises
    ``ValueError`` for a missing chunk or a gap.
    """
    floor = 0 if after_sequence is None else after_sequence
    listed = index.chunks if index is not None else ()
    by_first = {chunk.first_sequence: chunk for chunk in chunks}
    window_first = index.window_first_sequence if index is not None else 1
    first = index.first_sequence if index is not None and listed else window_first
    expected = max(first, floor + 1)
    # A chunk's messages are consecutive (AgentMessageChunk checks), so only where
    # one part meets the next is checked, not every message.
    parts: list[Sequence[AgentMessage]] = []
    for info in listed:
        if info.last_sequence <= floor:
            continue
        chunk = by_first.get(info.first_sequence)
        if chunk is None:
            raise ValueError(
                f"chunk {message_sequence_key(info.first_sequence)} listed in"
                " AgentMessageIndex was not loaded"
            )
        part = chunk.messages[max(0, floor + 1 - chunk.first_sequence) :]
        if part:
            _check_next(expected, part[0].sequence)
            expected = part[-1].sequence + 1
            parts.append(part)
    return ChunkedMessages(
        tuple(itertools.chain.from_iterable(parts)), expected, max(window_first, floor + 1)
    )


def with_window(
    chunked: ChunkedMessages, window: Iterable[AgentMessage]
) -> tuple[AgentMessage, ...]:
    """``chunked`` followed by the ``AgentMessages`` values of ``window`` it leaves for them.

    The second part of ``stored_messages``. Raises ``ValueError`` for a gap.
    """
    expected = chunked.next_sequence
    later = [message for message in window if message.sequence >= chunked.window_from]
    # The window comes in key order, which is sequence order: one comparison of the
    # sequences with the run they must be tells it, and only a window that is not
    # (sorted or not consecutive) costs a sort and a check per message.
    if [message.sequence for message in later] != list(range(expected, expected + len(later))):
        later.sort(key=_sequence)
        for message in later:
            _check_next(expected, message.sequence)
            expected += 1
    return chunked.messages + tuple(later)


def stored_messages(
    index: AgentMessageIndex | None,
    chunks: Iterable[AgentMessageChunk],
    window: Iterable[AgentMessage],
    *,
    after_sequence: int | None = None,
) -> tuple[AgentMessage, ...]:
    """The stored messages in sequence order, from the kept chunks and the window.

    ``chunks`` must include every chunk ``index`` lists (others are ignored);
    ``window`` holds the ``AgentMessages`` values. Without an index every message
    is in the window. With ``after_sequence`` (``RunModel`` passes
    ``ContextSummary.last_sequence`` under compaction) only later messages are
    returned, and only the chunks ``chunks_to_load_for_model`` names are needed.
    Raises ``ValueError`` for a missing chunk or a gap.
    """
    return with_window(chunked_messages(index, chunks, after_sequence=after_sequence), window)


_sequence = operator.attrgetter("sequence")


def _check_next(expected: int, found: int) -> None:
    if found != expected:
        raise ValueError(
            f"stored messages are not consecutive: expected sequence {expected}, found {found}"
        )


def page_agent_messages(
    request: ListAgentMessagesRequest,
    messages: Sequence[AgentMessage],
    index: AgentMessageIndex | None,
) -> AgentMessagesPage:
    """One ``list_agent_messages`` page of ``messages`` (every stored message, in order).

    With ``before_sequence``, the newest messages before it; with
    ``after_sequence``, the oldest after it; with neither, the newest. Oldest
    first, ``limit`` clamped to 1..200; ``has_more`` says whether more messages
    lie beyond the page in the direction paged. Raises ``ValueError`` when both
    sequences are set.
    """
    if request.before_sequence is not None and request.after_sequence is not None:
        raise ValueError("set before_sequence or after_sequence, not both")
    limit = clamp_page_limit(request.limit)
    sequences = [message.sequence for message in messages]
    if request.after_sequence is not None:
        start = bisect_right(sequences, request.after_sequence)
        end = min(start + limit, len(messages))
        has_more = end < len(messages)
    else:
        end = (
            len(messages)
            if request.before_sequence is None
            else bisect_left(sequences, request.before_sequence)
        )
        start = max(end - limit, 0)
        has_more = start > 0
    return AgentMessagesPage(
        messages=tuple(messages[start:end]),
        has_more=has_more,
        deleted_before_sequence=deleted_before_sequence(index),
    )


def snapshot_floor(last_sequence: int) -> int | None:
    """The ``after_sequence`` that reads just the snapshot's messages: ``None`` reads them all.

    A snapshot shows the last 200 of a session's messages; reading only those
    keeps its cost flat however long the session grows.
    """
    floor = last_sequence - SNAPSHOT_MESSAGE_LIMIT
    return floor if floor > 0 else None


def snapshot_messages(messages: Sequence[AgentMessage]) -> tuple[AgentMessage, ...]:
    """The last 200 stored messages, oldest first, as ``AgentSnapshot.messages``."""
    return tuple(messages[-SNAPSHOT_MESSAGE_LIMIT:])


def chunks_to_load_for_model(
    index: AgentMessageIndex | None,
    *,
    compaction_enabled: bool,
    summary_last_sequence: int | None,
) -> tuple[MessageChunkInfo, ...]:
    """The chunks ``RunModel`` loads.

    Without compaction the model input is every message, so every kept chunk.
    With compaction, only chunks holding a message after
    ``ContextSummary.last_sequence`` (every chunk before the first summary).
    """
    if index is None:
        return ()
    if not compaction_enabled or summary_last_sequence is None:
        return index.chunks
    return tuple(chunk for chunk in index.chunks if chunk.last_sequence > summary_last_sequence)
