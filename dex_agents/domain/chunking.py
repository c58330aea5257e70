"""The store-messages commit plan: which messages enter the window and which move into chunks.

Rules, in the order they apply to one commit:

- The window and the new messages form one run of consecutive sequences, packed
  oldest first into candidate chunks: each chunk takes consecutive messages while
  it holds at most ``message_chunk_size`` messages and its size stays within
  ``message_chunk_max_bytes``. A chunk's size is the exact byte length of the
  ``AgentMessageChunk`` value's canonical JSON (``encoded_chunk_size``), computed
  from the messages' encoded sizes, so ``MessageChunkInfo.size_bytes`` is what
  the Server stores.
- A message is oversized when a chunk of it alone is larger than
  ``message_chunk_max_bytes``. It always forms its own chunk.
- The commit writes the leading candidate chunks while the window would still hold
  more than ``message_window_size`` messages, and through the newest new
  oversized message, so that message skips the window. Chunks and window are one
  run in sequence order, so every older message moves into chunks first, in the
  same commit.
- One commit writes at most ``MAX_CHUNKS_PER_COMMIT`` (4) chunks and
  ``MAX_CHUNK_BYTES_PER_COMMIT`` (8 MiB) of chunks; its first chunk is always
  allowed, so a single oversized message still moves. Whatever the caps leave
  stays in the window for later commits: a 0.1.0 session, which has no index and
  every message in the window, drains at most 4 chunks per commit. A new
  oversized message that cannot move within the caps, because too many older
  messages precede it, enters the window and moves alone at a later rollover.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex, MessageChunkInfo
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.windowing import (
    MAX_CHUNK_BYTES_PER_COMMIT,
    MAX_CHUNKS_PER_COMMIT,
    MessageStorageOptions,
    message_sequence_key,
)
from dex_agents.domain.wire import json_size

# '{"first_sequence":' + ',"last_sequence":' + ',"messages":[' + ']}' in canonical JSON.
_CHUNK_JSON_OVERHEAD = 50


def encoded_chunk_size(
    first_sequence: int, last_sequence: int, message_sizes: Sequence[int]
) -> int:
    """The canonical JSON size of an ``AgentMessageChunk`` from its messages' encoded sizes.

    Equal to ``json_size(chunk)`` when each size is ``json_size`` of its message:
    the fixed keys, both sequences' digits, the message bytes, and one comma
    between messages.
    """
    return _chunk_size(first_sequence, last_sequence, sum(message_sizes), len(message_sizes))


def _chunk_size(first_sequence: int, last_sequence: int, total: int, count: int) -> int:
    # encoded_chunk_size from the sum and count of the message sizes, so packing can grow
    # a chunk by one message without summing it again.
    return (
        _CHUNK_JSON_OVERHEAD
        + len(str(first_sequence))
        + len(str(last_sequence))
        + total
        + max(count - 1, 0)
    )


def is_oversized_message(sequence: int, size_bytes: int, message_chunk_max_bytes: int) -> bool:
    """Whether a message of ``size_bytes`` is too large to share a chunk: alone it exceeds the limit."""
    return encoded_chunk_size(sequence, sequence, (size_bytes,)) > message_chunk_max_bytes


@attrs.frozen(kw_only=True)
class StoreMessagesPlan:
    """What one commit that stores messages writes and deletes.

    ``window_messages`` are the new messages to put into ``AgentMessages``;
    ``chunks`` the new ``AgentMessageChunks`` instances, oldest first;
    ``deleted_window_keys`` the ``AgentMessages`` keys of window messages that
    moved into them. ``index`` is the ``AgentMessageIndex`` after the commit: the
    very object passed in (``None`` while unset) when ``index_changed`` is
    ``False``, because no chunk was written.
    """

    window_messages: tuple[AgentMessage, ...]
    chunks: tuple[AgentMessageChunk, ...]
    deleted_window_keys: tuple[str, ...]
    index: AgentMessageIndex | None
    index_changed: bool

    @property
    def chunk_keys(self) -> tuple[str, ...]:
        """The ``AgentMessageChunks`` key of each new chunk."""
        return tuple(message_sequence_key(chunk.first_sequence) for chunk in self.chunks)


def _check_sequences(
    first: int, window: Sequence[AgentMessage], new_messages: Sequence[AgentMessage]
) -> None:
    for position, message in enumerate(window):
        if message.sequence != first + position:
            raise ValueError(
                f"window message {position} has sequence {message.sequence}, expected"
                f" {first + position}: the window is consecutive from window_first_sequence {first}"
            )
    following = first + len(window)
    for position, message in enumerate(new_messages):
        if message.sequence != following + position:
            raise ValueError(
                f"new message {position} has sequence {message.sequence}, expected"
                f" {following + position}: new messages continue the window"
            )


def _pack(
    messages: Sequence[AgentMessage], sizes: Sequence[int], options: MessageStorageOptions
) -> list[tuple[int, int, int]]:
    """Greedy candidate chunks over ``messages``: (start, end exclusive, size_bytes)."""
    limit = options.message_chunk_max_bytes
    groups: list[tuple[int, int, int]] = []
    start = 0
    while start < len(messages):
        first = messages[start].sequence
        total = sizes[start]
        size = _chunk_size(first, first, total, 1)
        end = start + 1
        if size <= limit:
            while end < len(messages) and end - start < options.message_chunk_size:
                grown_total = total + sizes[end]
                grown = _chunk_size(first, messages[end].sequence, grown_total, end + 1 - start)
                if grown > limit:
                    break
                size, total, end = grown, grown_total, end + 1
        groups.append((start, end, size))
        start = end
    return groups


def _chunks_within_caps(groups: Sequence[tuple[int, int, int]]) -> int:
    """How many leading groups one commit may write."""
    allowed, moved = 0, 0
    for _start, _end, size in groups[:MAX_CHUNKS_PER_COMMIT]:
        if allowed and moved + size > MAX_CHUNK_BYTES_PER_COMMIT:
            break
        allowed, moved = allowed + 1, moved + size
    return allowed


def _checked_size(message: AgentMessage, message_size: Callable[[AgentMessage], int]) -> int:
    size = message_size(message)
    if size < 0:
        raise ValueError(f"message {message.sequence} has a negative size {size}")
    return size


def _any_oversized(
    messages: Sequence[AgentMessage], message_size: Callable[[AgentMessage], int], limit: int
) -> bool:
    return any(
        is_oversized_message(message.sequence, _checked_size(message, message_size), limit)
        for message in messages
    )


def _nothing_moves(
    index: AgentMessageIndex | None, new_messages: Sequence[AgentMessage]
) -> StoreMessagesPlan:
    return StoreMessagesPlan(
        window_messages=tuple(new_messages),
        chunks=(),
        deleted_window_keys=(),
        index=index,
        index_changed=False,
    )


def plan_store_messages(
    *,
    index: AgentMessageIndex | None,
    window: Sequence[AgentMessage],
    new_messages: Sequence[AgentMessage],
    options: MessageStorageOptions,
    message_size: Callable[[AgentMessage], int] = json_size,
) -> StoreMessagesPlan:
    """Plan the commit that stores ``new_messages`` after the current ``window``.

    ``index`` is the ``AgentMessageIndex`` Attribute, ``None`` while unset (then
    the window starts at sequence 1, as in a 0.1.0 session). ``window`` is every
    ``AgentMessages`` value in sequence order and ``new_messages`` continue it.
    ``message_size`` gives a message's encoded JSON size (``json_size`` by
    default; pass stored byte lengths to avoid re-encoding). See the module
    docstring for the rules. Raises ``ValueError`` for sequences that do not line
    up or a negative size (of a message it sizes: the window's messages are sized
    only when some may move into a chunk).
    """
    first = index.window_first_sequence if index is not None else 1
    _check_sequences(first, window, new_messages)
    if len(window) + len(new_messages) <= options.message_window_size and not _any_oversized(
        new_messages, message_size, options.message_chunk_max_bytes
    ):
        # The window keeps every message and no new one must go to a chunk of its own, so
        # nothing moves: most commits store messages this way, and need not size the window.
        return _nothing_moves(index, new_messages)
    messages = (*window, *new_messages)
    sizes = [_checked_size(message, message_size) for message in messages]

    groups = _pack(messages, sizes, options)
    allowed = _chunks_within_caps(groups)
    needed = 0
    while needed < len(groups) and len(messages) - groups[needed][0] > options.message_window_size:
        needed += 1
    limit = options.message_chunk_max_bytes
    for group_number, (start, end, _size) in enumerate(groups[:allowed]):
        single_new = end - start == 1 and start >= len(window)
        if single_new and is_oversized_message(messages[start].sequence, sizes[start], limit):
            needed = max(needed, group_number + 1)
    written = groups[: min(needed, allowed)]

    if not written:
        return _nothing_moves(index, new_messages)
    moved_through = written[-1][1]
    chunks = tuple(
        AgentMessageChunk(
            first_sequence=messages[start].sequence,
            last_sequence=messages[end - 1].sequence,
            messages=messages[start:end],
        )
        for start, end, _size in written
    )
    infos = tuple(
        MessageChunkInfo(
            first_sequence=chunk.first_sequence,
            last_sequence=chunk.last_sequence,
            message_count=len(chunk.messages),
            size_bytes=size,
        )
        for chunk, (_start, _end, size) in zip(chunks, written, strict=True)
    )
    base = index if index is not None else AgentMessageIndex()
    return StoreMessagesPlan(
        window_messages=messages[max(moved_through, len(window)) :],
        chunks=chunks,
        deleted_window_keys=tuple(
            message_sequence_key(message.sequence) for message in window[:moved_through]
        ),
        index=AgentMessageIndex(
            chunks=(*base.chunks, *infos),
            window_first_sequence=first + moved_through,
            first_sequence=base.first_sequence,
        ),
        index_changed=True,
    )
