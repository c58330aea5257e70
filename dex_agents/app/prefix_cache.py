"""A process cache of work done over the start of a growing sequence.

A session's stored messages only grow at the end (retention drops whole chunks
from the start, and then nothing matches), and every model call walks them all
again. ``PrefixCache`` keeps, per key, what a walk produced and the elements it
walked; a later walk whose sequence starts with those same elements resumes
after them. The check is a tuple comparison: element identity first (values
decoded once per process are the same objects), equality otherwise, so a hit is
never wrong, only sometimes missed. Where the caller has one, a lineage whose
source vouches that each of its sequences starts with the one before
(``message_lineage.py``) stands in for the comparison.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, NamedTuple, TypeVar

from dex_agents.app.sized_lru import SizedLru
from dex_agents.domain.kept_memory import MemoryRate

T = TypeVar("T")
S = TypeVar("S")

DEFAULT_PREFIX_CACHE_ENTRIES = 4096
"""The keys one cache keeps (least recently used dropped first): one per session whose
model calls a process serves. A session's entry costs little when it is short, and
a worker serving more sessions than this walked each one's messages anew at each call."""

DEFAULT_PREFIX_CACHE_WEIGHT = 32 * 1024 * 1024
"""The memory all kept walks take together, at most, in bytes: each is charged its weight
(about the characters of the stored text it was walked from) times the bytes per unit
of weight that sampled walks took, and a fixed part (``kept_memory.py``), three to five
bytes a unit for the built-in loop's walks. A count of elements (20,000) bounded the memory only for short messages,
and made a worker serving 30 sessions of 200 turns walk every message again at each
model call (``bench/session_working_set.py``); a weight in characters alone let the
walks take several times the bound."""


class PrefixCache(Generic[T, S]):
    """Per key, the longest walked prefix of a sequence and the state the walk reached there.

    Keeps at most ``entries`` keys and ``most_weight`` of weight in all, least
    recently used dropped first; a heavier walk is not kept. A kept walk weighs
    what ``weigh`` says of its state, plus one for each element it keeps, and is
    charged that times the bytes per unit of weight that sampled walks took in
    memory, and a fixed part (with ``measured``; without it, its weight alone).
    With ``walks_per_key`` above one, a key keeps that many walks of different
    sequences, the oldest kept dropped first, and a resume takes the longest
    that the sequence starts with: for a key that sequences of different
    sessions share. Thread-safe: Steps run on the event loop, and RPCs on it or
    on a store thread (two threads that remember walks of one key at once may
    keep only one of them: a later resume misses, never errs).
    """

    def __init__(
        self,
        weigh: Callable[[S], int],
        *,
        entries: int = DEFAULT_PREFIX_CACHE_ENTRIES,
        most_weight: int = DEFAULT_PREFIX_CACHE_WEIGHT,
        walks_per_key: int = 1,
        measured: bool = True,
    ) -> None:
        if walks_per_key < 1:
            raise ValueError(f"walks_per_key must be at least 1, not {walks_per_key}")
        self._weigh = weigh
        self._walks_per_key = walks_per_key
        self._remembered = itertools.count()
        self._cached: SizedLru[tuple[_Walk[T, S], ...]] = SizedLru(
            entries, most_weight, _weight, rate=MemoryRate() if measured else None
        )
        self._compared = 0

    @property
    def compared(self) -> int:
        """How many elements resumes have compared so far: the work a ``lineage`` spares."""
        return self._compared

    def resume(
        self, key: Hashable, sequence: Sequence[T], *, lineage: object | None = None
    ) -> tuple[int, S] | None:
        """How many elements of ``sequence`` were walked, and the state there; ``None`` for none.

        A ``lineage`` that is the one the walk was remembered with vouches that
        ``sequence`` starts with the walked sequence (``message_lineage.py``), so
        no element is looked at.
        """
        walks = self._cached.get(key)
        if walks is None:
            return None
        for walk in walks:  # longest first
            if walk.walked > len(sequence):
                continue
            if lineage is not None and lineage is walk.lineage:
                return walk.resumed
            starts, compared = _starts(sequence, walk)
            self._compared += compared
            if starts:
                return walk.resumed
        return None

    def remember(
        self,
        key: Hashable,
        sequence: Sequence[T],
        state: S,
        *,
        walked: int | None = None,
        lineage: object | None = None,
        replacing: tuple[int, S] | None = None,
    ) -> None:
        """Keep ``state`` as what walking the first ``walked`` elements of ``sequence`` (all of
        them by default) reached, for ``key``. With a ``lineage`` (``resume``) the whole
        tuple is kept, not copied up to ``walked``: it is not looked at again while the
        lineage holds. ``replacing`` is what ``resume`` gave for ``sequence``: with
        ``walks_per_key`` above one, the walk it came from (a session's walk of its
        previous call) is of no more use, and the new walk takes its place."""
        end = len(sequence) if walked is None else walked
        if lineage is not None and isinstance(sequence, tuple):
            elements: tuple[T, ...] = sequence
        else:
            elements = tuple(sequence[:end])
        walk = _Walk(
            elements,
            lineage,
            (end, state),
            next(self._remembered),
            len(elements) + self._weigh(state),
        )
        kept: tuple[_Walk[T, S], ...] = ()
        if self._walks_per_key > 1:
            kept = self._cached.get(key) or ()
            for position, earlier in enumerate(kept):
                if earlier.resumed is replacing:
                    kept = kept[:position] + kept[position + 1 :]
                    break
            if len(kept) >= self._walks_per_key:
                oldest = min(range(len(kept)), key=lambda position: kept[position].remembered)
                kept = kept[:oldest] + kept[oldest + 1 :]
        longer = 0  # the walks stay longest first
        while longer < len(kept) and kept[longer].walked >= end:
            longer += 1
        self._cached.put(key, (*kept[:longer], walk, *kept[longer:]))

    def clear(self) -> None:
        """Forget every key."""
        self._cached.clear()


class _Walk(NamedTuple, Generic[T, S]):
    elements: tuple[T, ...]
    """The walked sequence: its first ``walked`` elements were walked."""
    lineage: object | None
    resumed: tuple[int, S]
    """What ``resume`` gives for it: ``walked`` and the state the walk reached there."""
    remembered: int
    """When it was remembered, in the cache's order: the oldest of a key goes first."""
    weight: int
    """What ``weigh`` says of its state, plus one for each element it keeps."""

    @property
    def walked(self) -> int:
        """How many of ``elements`` were walked."""
        return self.resumed[0]


def _weight(walks: tuple[_Walk[T, S], ...]) -> int:
    if len(walks) == 1:  # every key of a cache that keeps one walk a key
        return walks[0].weight
    return sum(walk.weight for walk in walks)


def _starts(sequence: Sequence[T], walk: _Walk[T, S]) -> tuple[bool, int]:
    """Whether ``sequence`` starts with ``walk``'s walked elements, and how many elements
    that compared."""
    walked = walk.walked
    elements = walk.elements
    prefix = elements if len(elements) == walked else elements[:walked]
    head = sequence[:walked]
    # The very tuple that was remembered (a tuple's whole slice is itself) needs no
    # look at its elements: a request's items are walked twice per model call.
    if head is prefix:
        return True, 0
    return tuple(head) == prefix, walked
