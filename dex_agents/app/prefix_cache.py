"""A process cache of work done over the start of a growing sequence.

A session's stored messages only grow at the end (retention drops whole chunks
from the start, and then nothing matches), and every model call walks them all
again. ``PrefixCache`` keeps, per key, what a walk produced and the elements it
walked; a later walk whose sequence starts with those same elements resumes
after them. The check is a tuple comparison: element identity first (values
decoded once per process are the same objects), equality otherwise, so a hit is
never wrong, only sometimes missed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from dex_agents.app.sized_lru import SizedLru

T = TypeVar("T")
S = TypeVar("S")

DEFAULT_PREFIX_CACHE_ENTRIES = 4096
"""The keys one cache keeps (least recently used dropped first): one per session whose
model calls a process serves. A session's entry costs little when it is short, and
a worker serving more sessions than this walked each one's messages anew at each call."""

DEFAULT_PREFIX_CACHE_WEIGHT = 32 * 1024 * 1024
"""What all kept walks weigh together, at most: about the characters of the stored
text they were walked from, as much text as the embedded engine keeps decoded. A
count of elements (20,000) bounded the memory only for short messages, and made a
worker serving 30 sessions of 200 turns walk every message again at each model
call (``bench/session_working_set.py``)."""


class PrefixCache(Generic[T, S]):
    """Per key, the longest walked prefix of a sequence and the state the walk reached there.

    Keeps at most ``entries`` keys and ``most_weight`` of weight in all, least
    recently used dropped first; a heavier walk is not kept. A kept walk weighs
    what ``weigh`` says of its state, plus one for each element it walked.
    Thread-safe: Steps run on the event loop, and RPCs on it or on a store thread.
    """

    def __init__(
        self,
        weigh: Callable[[S], int],
        *,
        entries: int = DEFAULT_PREFIX_CACHE_ENTRIES,
        most_weight: int = DEFAULT_PREFIX_CACHE_WEIGHT,
    ) -> None:
        self._cached: SizedLru[tuple[tuple[T, ...], S]] = SizedLru(
            entries, most_weight, lambda entry: len(entry[0]) + weigh(entry[1])
        )

    def resume(self, key: Hashable, sequence: Sequence[T]) -> tuple[int, S] | None:
        """How many elements of ``sequence`` were walked, and the state there; ``None`` for none."""
        found = self._cached.get(key)
        if found is None:
            return None
        prefix, state = found
        walked = len(prefix)
        if walked > len(sequence):
            return None
        head = sequence[:walked]
        # The very tuple that was remembered (a tuple's whole slice is itself) needs no
        # look at its elements: a request's items are walked twice per model call.
        if head is not prefix and tuple(head) != prefix:
            return None
        return walked, state

    def remember(self, key: Hashable, prefix: Sequence[T], state: S) -> None:
        """Keep ``state`` as what walking ``prefix`` reached, for ``key``."""
        self._cached.put(key, (tuple(prefix), state))

    def clear(self) -> None:
        """Forget every key."""
        self._cached.clear()
