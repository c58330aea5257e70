"""A process cache of each session's kept chunks joined into one run of messages.

Every model call reads every stored message: the kept chunks, then the window.
Joining the chunks (``chunked_messages``) walks each of them, and a long session
keeps over a hundred, so its model calls, two a turn, did that walk again and
again, and the garbage collector then traversed each new run of thousands of
messages. A chunk never changes at its key and the ``AgentMessageIndex`` changes
only when messages roll over into a new chunk, about every tenth turn, so each
session's run is kept while the index and the chunks given are the same objects
(the embedded engine decodes a value once per process): the check is an identity
test of the index, then a tuple comparison of the chunks, element identity first.
An engine that decodes afresh for every read (Dex) never matches, and keeps one
run per session, replaced at each call.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents.app.sized_lru import SizedLru
from dex_agents.domain.kept_memory import MemoryRate
from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex
from dex_agents.domain.paging import ChunkedMessages, chunked_messages

DEFAULT_CHUNK_RUNS_KEPT = 4096
"""The runs one cache keeps (least recently used dropped first): one per session whose
model calls a process serves."""

DEFAULT_CHUNK_RUN_WEIGHT = 32 * 1024 * 1024
"""The memory all kept runs take together, at most, in bytes: each is charged the stored
size of its messages (``MessageChunkInfo.size_bytes``) and one for each, times the bytes
per unit that sampled runs took, and a fixed part (``kept_memory.py``). A kept run keeps its messages
alive, so this bounds the memory, as ``DEFAULT_PREFIX_CACHE_WEIGHT`` does."""

_Kept = tuple[AgentMessageIndex, tuple[AgentMessageChunk, ...], ChunkedMessages, int]


def _weight(kept: _Kept) -> int:
    return len(kept[2].messages) + kept[3]


class ChunkRuns:
    """``chunked_messages``, kept per (session, floor) while the index and chunks stay the same.

    A run is charged its weight times the bytes per unit of weight sampled runs took,
    and a fixed part (``measured``), or its weight alone. Thread-safe: Steps read on the event loop,
    RPCs on it or on a store thread.
    """

    def __init__(
        self,
        entries: int = DEFAULT_CHUNK_RUNS_KEPT,
        most_weight: int = DEFAULT_CHUNK_RUN_WEIGHT,
        *,
        measured: bool = True,
    ) -> None:
        self._kept: SizedLru[_Kept] = SizedLru(
            entries, most_weight, _weight, rate=MemoryRate() if measured else None
        )

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def held(self) -> int:
        """What the kept runs are charged together."""
        return self._kept.held

    def get(
        self,
        session_id: str,
        index: AgentMessageIndex | None,
        chunks: Sequence[AgentMessageChunk],
        *,
        after_sequence: int | None = None,
    ) -> ChunkedMessages:
        """``chunked_messages(index, chunks, after_sequence=after_sequence)`` of session
        ``session_id``, computed once while the index and the chunks are the same."""
        if index is None or not index.chunks:
            return chunked_messages(index, chunks, after_sequence=after_sequence)
        key = (session_id, after_sequence)
        given = tuple(chunks)
        found = self._kept.get(key)
        if found is not None and found[0] is index and found[1] == given:
            return found[2]
        run = chunked_messages(index, given, after_sequence=after_sequence)
        floor = 0 if after_sequence is None else after_sequence
        size = sum(info.size_bytes for info in index.chunks if info.last_sequence > floor)
        self._kept.put(key, (index, given, run, size))
        return run

    def clear(self) -> None:
        """Forget every run."""
        self._kept.clear()
