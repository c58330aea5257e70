"""A thread-safe least-recently-used map bounded in entries and in the memory of its values.

The process caches of the app layer (``PrefixCache``, ``ChunkRuns``) keep runs of
decoded messages alive. A value's ``size`` is a cheap measure of it (the characters
of the text its objects were decoded from, how many elements it holds); with a
``MemoryRate`` each value is charged a fixed part and that measure times the bytes
per unit that sampled values took (``kept_memory.py``), so the bound is on memory,
not on text.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from dex_agents.domain.kept_memory import MemoryRate

V = TypeVar("V")


class SizedLru(Generic[V]):
    """At most ``entries`` values and ``total`` of their charges together, least
    recently used dropped first; a value charged more than ``total`` is not kept.

    A value is charged its ``size``, or with a ``rate`` what ``MemoryRate.charge``
    says of its ``size``: about the memory it takes, learned from sampled values.
    """

    def __init__(
        self,
        entries: int,
        total: int,
        size: Callable[[V], int],
        *,
        rate: MemoryRate | None = None,
    ) -> None:
        self._entries = entries
        self._total = total
        self._size = size
        self._rate = rate
        self._held = 0
        self._kept: OrderedDict[Hashable, V] = OrderedDict()
        self._charges: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def held(self) -> int:
        """What the kept values are charged together."""
        return self._held

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
        charge = size if self._rate is None else self._rate.charge(size, value)
        with self._lock:
            if self._kept.pop(key, None) is not None:
                self._held -= self._charges.pop(key)
            if charge > self._total:
                return
            self._kept[key] = value
            self._charges[key] = charge
            self._held += charge
            while len(self._kept) > self._entries or self._held > self._total:
                dropped, _ = self._kept.popitem(last=False)
                self._held -= self._charges.pop(dropped)

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._kept.clear()
            self._charges.clear()
            self._held = 0
