"""Counters of what a process decodes and inflates again, for ``session_working_set.py --counts``.

A bench wraps the module functions the engine calls (the store's inflation of a
stored value, the decoded-value cache's decode of a text it does not keep, the
join of a session's chunks, the built-in loop's walk of its messages) so that a
steady-state turn's work that grows with a session's history is counted, not
timed: the machine's speed moves from run to run, the counts do not.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dex_agents.adapters.local import decoded_values, stored_text
from dex_agents.app import chunk_runs, prefix_cache
from dex_agents.app.builtin_loop import conversation
from dex_agents.domain import paging
from dex_agents.domain.message_index import AgentMessageChunk
from dex_agents.domain.messages import AgentMessage

COUNTED_NAMES = (
    "value inflations",
    "chars inflated",
    "other inflations",
    "chunk decodes",
    "message decodes",
    "chars decoded",
    "chunk runs joined",
    "walks from the start",
)
"""What is counted, in the order printed."""

COUNTED = Counter[str]()
"""What was counted since the last ``COUNTED.clear()``."""


def install() -> None:
    """Wrap the counted functions; once per process."""
    inflated = stored_text._inflated
    from_stored = decoded_values.from_stored
    joined = paging.chunked_messages
    resume = prefix_cache.PrefixCache.resume

    def counted_inflated(stored: bytes) -> str:
        text = inflated(stored)
        if stored[:1] == bytes((stored_text.ZLIB_VALUE,)):  # a value: a chunk, the index, a state
            COUNTED["value inflations"] += 1
            COUNTED["chars inflated"] += len(text)
        else:  # an event, a block of them, a Step history's field
            COUNTED["other inflations"] += 1
        return text

    def counted_from_stored(text: str, cls: Any, store: object = None) -> Any:
        value = from_stored(text, cls, store)
        if cls is AgentMessageChunk:
            COUNTED["chunk decodes"] += 1
            COUNTED["message decodes"] += len(value.messages)
            COUNTED["chars decoded"] += len(text)
        elif cls is AgentMessage:
            COUNTED["message decodes"] += 1
            COUNTED["chars decoded"] += len(text)
        return value

    def counted_joined(*args: Any, **kwargs: Any) -> Any:
        COUNTED["chunk runs joined"] += 1
        return joined(*args, **kwargs)

    def counted_resume(self: Any, key: Any, sequence: Any, **kwargs: Any) -> Any:
        found = resume(self, key, sequence, **kwargs)
        if self is conversation._WALKED and (found is None or found[0] < len(sequence) // 2):
            COUNTED["walks from the start"] += 1
        return found

    stored_text._inflated = counted_inflated
    decoded_values.from_stored = counted_from_stored
    chunk_runs.chunked_messages = counted_joined  # type: ignore[attr-defined]
    prefix_cache.PrefixCache.resume = counted_resume  # type: ignore[method-assign]


def held() -> dict[str, float]:
    """What each bounded cache is charged now, in bytes."""
    from dex_agents.adapters.local.decoded_values import DECODED
    from dex_agents.app.message_store import CHUNK_RUNS

    return {
        "decoded held": float(DECODED._bytes),
        "runs held": float(CHUNK_RUNS.held),
        "walks held": float(conversation._WALKED._cached.held),
    }
