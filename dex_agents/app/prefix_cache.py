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

from collections.abc import Callable, Hashable, Sequence
from typing import Generic, NamedTuple, TypeVar

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
    what ``weigh`` says of its state, plus one for each element it keeps.
    Thread-safe: Steps run on the event loop, and RPCs on it or on a store thread.
    """

    def __init__(
        self,
        weigh: Callable[[S], int],
        *,
        entries: int = DEFAULT_PREFIX_CACHE_ENTRIES,
        most_weight: int = DEFAULT_PREFIX_CACHE_WEIGHT,
    ) -> None:
        self._cached: SizedLru[_Walk[T, S]] = SizedLru(
            entries, most_weight, lambda walk: len(walk.elements) + weigh(walk.state)
        )

    def resume(
        self, key: Hashable, sequence: Sequence[T], *, lineage: object | None = None
    ) -> tuple[int, S] | None:
        """How many elements of ``sequence`` were walked, and the state there; ``None`` for none.

        A ``lineage`` that is the one the walk was remembered with vouches that
        ``sequence`` starts with the walked sequence (``message_lineage.py``), so
        no element is looked at.
        """
        found = self._cached.get(key)
        if found is None:
            return None
        walked = found.walked
        if walked > len(sequence):
            return None
        if lineage is not None and lineage is found.lineage:
            return walked, found.state
        elements = found.elements
        prefix = elements if len(elements) == walked else elements[:walked]
        head = sequence[:walked]
        # The very tuple that was remembered (a tuple's whole slice is itself) needs no
        # look at its elements: a request's items are walked twice per model call.
        if head is not prefix and tuple(head) != prefix:
            return None
        return walked, found.state

    def remember(
        self,
        key: Hashable,
        sequence: Sequence[T],
        state: S,
        *,
        walked: int | None = None,
        lineage: object | None = None,
    ) -> None:
        """Keep ``state`` as what walking the first ``walked`` elements of ``sequence`` (all of
        them by default) reached, for ``key``. With a ``lineage`` (``resume``) the whole
        tuple is kept, not copied up to ``walked``: it is not looked at again while the
        lineage holds."""
        end = len(sequence) if walked is None else walked
        if lineage is not None and isinstance(sequence, tuple):
            elements: tuple[T, ...] = sequence
        else:
            elements = tuple(sequence[:end])
        self._cached.put(key, _Walk(elements, end, lineage, state))

    def clear(self) -> None:
        """Forget every key."""
        self._cached.clear()


class _Walk(NamedTuple, Generic[T, S]):
    elements: tuple[T, ...]
    """The walked sequence: its first ``walked`` elements were walked."""
    walked: int
    lineage: object | None
    state: S
