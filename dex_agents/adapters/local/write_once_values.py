"""The text of write-once AttributeMap instances this process has read, kept for its next reads.

A session's message chunks are written once and never rewritten (retention
deletes whole chunks), yet every ``RunModel`` loads them all. Keeping their text
means a load reads only the map's keys and then the values of keys it has not
seen: a long session's Steps stop reading its whole history from the file.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

DEFAULT_WRITE_ONCE_CACHE_BYTES = 16 * 1024 * 1024
"""How much value text one store keeps, at most (least recently used dropped first)."""

ValueKey = tuple[str, str, str]
"""``(flow_id, map name, instance key)``."""


class WriteOnceValues:
    """A least-recently-used map from ``(flow_id, name, key)`` to a value's JSON text, bounded in bytes.

    A write or delete of a key through the store forgets it, so even a rewrite
    that breaks the contract is not served stale to this process.
    """

    def __init__(self, max_bytes: int = DEFAULT_WRITE_ONCE_CACHE_BYTES) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._values: OrderedDict[ValueKey, str] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, flow_id: str, name: str, keys: list[str]) -> dict[str, str]:
        """The kept values among ``keys``."""
        found: dict[str, str] = {}
        with self._lock:
            for key in keys:
                text = self._values.get((flow_id, name, key))
                if text is not None:
                    self._values.move_to_end((flow_id, name, key))
                    found[key] = text
        return found

    def keep(self, flow_id: str, name: str, values: dict[str, str]) -> None:
        """Keep ``values`` (read from the store) by key."""
        with self._lock:
            for key, text in values.items():
                if len(text) > self._max_bytes // 4:
                    continue
                previous = self._values.pop((flow_id, name, key), None)
                if previous is not None:
                    self._bytes -= len(previous)
                self._values[(flow_id, name, key)] = text
                self._bytes += len(text)
            while self._bytes > self._max_bytes:
                _, evicted = self._values.popitem(last=False)
                self._bytes -= len(evicted)

    def forget(self, flow_id: str, name: str, key: str) -> None:
        """Drop one value, written or deleted now."""
        with self._lock:
            previous = self._values.pop((flow_id, name, key), None)
            if previous is not None:
                self._bytes -= len(previous)
