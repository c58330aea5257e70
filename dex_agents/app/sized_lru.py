"""A thread-safe least-recently-used map bounded in entries and in the size of its values.

The process caches of the app layer (``PrefixCache``, ``ChunkRuns``) keep runs of
decoded messages alive: each value's size is how many elements it holds, and the
sum of the sizes bounds the memory they keep.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class SizedLru(Generic[V]):
    """At most ``entries`` values and ``total`` of their ``size`` together, least
    recently used dropped first; a value larger than ``total`` is not kept."""

    def __init__(self, entries: int, total: int, size: Callable[[V], int]) -> None:
        self._entries = entries
        self._total = total
        self._size = size
        self._held = 0
        self._kept: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: Hashable) -> V | None:
        """The value kept for ``key``, now the most recently used; ``None`` for none."""
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def put(self, key: Hashable, value: V) -> None:
        """Keep ``value`` for ``key`` in place of what was kept for it."""
        size = self._size(value)
        with self._lock:
            previous = self._kept.pop(key, None)
            if previous is not None:
                self._held -= self._size(previous)
            if size > self._total:
                return
            self._kept[key] = value
            self._held += size
            while len(self._kept) > self._entries or self._held > self._total:
                _, dropped = self._kept.popitem(last=False)
                self._held -= self._size(dropped)

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._kept.clear()
            self._held = 0
