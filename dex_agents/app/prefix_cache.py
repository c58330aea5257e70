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

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
S = TypeVar("S")

DEFAULT_PREFIX_CACHE_ENTRIES = 256
"""The keys one cache keeps (least recently used dropped first): about one per active session."""


class PrefixCache(Generic[T, S]):
    """Per key, the longest walked prefix of a sequence and the state the walk reached there.

    Thread-safe: Steps run on the event loop and RPCs on a store thread.
    """

    def __init__(self, entries: int = DEFAULT_PREFIX_CACHE_ENTRIES) -> None:
        self._entries = entries
        self._cached: OrderedDict[Hashable, tuple[tuple[T, ...], S]] = OrderedDict()
        self._lock = threading.Lock()

    def resume(self, key: Hashable, sequence: Sequence[T]) -> tuple[int, S] | None:
        """How many elements of ``sequence`` were walked, and the state there; ``None`` for none."""
        with self._lock:
            found = self._cached.get(key)
            if found is not None:
                self._cached.move_to_end(key)
        if found is None:
            return None
        prefix, state = found
        walked = len(prefix)
        if walked > len(sequence) or tuple(sequence[:walked]) != prefix:
            return None
        return walked, state

    def remember(self, key: Hashable, prefix: Sequence[T], state: S) -> None:
        """Keep ``state`` as what walking ``prefix`` reached, for ``key``."""
        entry = (tuple(prefix), state)
        with self._lock:
            self._cached[key] = entry
            self._cached.move_to_end(key)
            while len(self._cached) > self._entries:
                self._cached.popitem(last=False)

    def clear(self) -> None:
        """Forget every key."""
        with self._lock:
            self._cached.clear()
