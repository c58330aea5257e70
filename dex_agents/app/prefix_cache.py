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

from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

from dex_agents.app.sized_lru import SizedLru

T = TypeVar("T")
S = TypeVar("S")

DEFAULT_PREFIX_CACHE_ENTRIES = 256
"""The keys one cache keeps (least recently used dropped first): about one per active session."""

DEFAULT_PREFIX_CACHE_ELEMENTS = 20_000
"""The elements all kept prefixes hold together, at most: a kept prefix keeps its
elements (decoded messages) alive, so this bounds the memory, about five
sessions of 1,000 turns."""


class PrefixCache(Generic[T, S]):
    """Per key, the longest walked prefix of a sequence and the state the walk reached there.

    Keeps at most ``entries`` keys and ``elements`` elements in all, least
    recently used dropped first; a longer prefix is not kept. Thread-safe:
    Steps run on the event loop, and RPCs on it or on a store thread.
    """

    def __init__(
        self,
        entries: int = DEFAULT_PREFIX_CACHE_ENTRIES,
        elements: int = DEFAULT_PREFIX_CACHE_ELEMENTS,
    ) -> None:
        self._cached: SizedLru[tuple[tuple[T, ...], S]] = SizedLru(
            entries, elements, lambda entry: len(entry[0])
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
