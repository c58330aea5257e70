"""The text of write-once AttributeMap instances this process has read, kept for its next reads.

A session's message chunks are written once and never rewritten (retention
deletes whole chunks), yet every ``RunModel`` loads them all. Keeping their text
means a load reads only the map's keys and then the values of keys it has not
seen: a long session's Steps stop reading its whole history from the file.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence, Set

from dex_agents.adapters.local.decoded_values import DEFAULT_CACHE_BYTES

DEFAULT_WRITE_ONCE_CACHE_BYTES = DEFAULT_CACHE_BYTES
"""How much value text one store keeps, at most (least recently used dropped first).

As much as ``DecodedValues`` counts: the texts kept here are the very strings it
holds as the keys of their decoded values, so keeping them costs little memory
of its own. (That bound counts the decoded objects beside their text since
2026-12-07, so it keeps about half as much text as this: the older half here
is text alone, read again without the file, decoded again.) A smaller bound made a process serving more long sessions than it
fits read and inflate their chunks again at every model call, only to find them
decoded already, and the text read again was a second copy of the one kept there.
"""

MapKey = tuple[str, str]
"""``(flow_id, map name)``."""


class WriteOnceValues:
    """The kept value text of each ``(flow_id, map)``, by instance key, bounded in bytes.

    A load asks for a whole map's keys at once, so values are kept per map. Past
    the bound, the map least recently loaded loses its values first, those of the
    smallest keys (a session's oldest messages) first. A write or delete of a key
    through the store forgets it, so even a rewrite that breaks the contract is
    not served stale to this process.
    """

    def __init__(self, max_bytes: int = DEFAULT_WRITE_ONCE_CACHE_BYTES) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._maps: OrderedDict[MapKey, dict[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, flow_id: str, name: str, keys: Sequence[str]) -> dict[str, str]:
        """The kept values among ``keys``."""
        with self._lock:
            kept = self._maps.get((flow_id, name))
            if kept is None:
                return {}
            self._maps.move_to_end((flow_id, name))
            return {key: kept[key] for key in keys if key in kept}

    def known_all(self, flow_id: str, name: str, keys: Set[str]) -> dict[str, str] | None:
        """Every kept value of the map, when the keys kept are exactly ``keys`` (all the map
        holds); otherwise ``None``, and ``known`` tells which of them are kept."""
        with self._lock:
            kept = self._maps.get((flow_id, name))
            if kept is None or kept.keys() != keys:
                return None
            self._maps.move_to_end((flow_id, name))
            return dict(kept)

    def keep(self, flow_id: str, name: str, values: dict[str, str]) -> None:
        """Keep ``values`` (read from the store) by key."""
        with self._lock:
            kept = self._maps.setdefault((flow_id, name), {})
            self._maps.move_to_end((flow_id, name))
            for key, text in values.items():
                if len(text) > self._max_bytes // 4:
                    continue
                previous = kept.pop(key, None)
                if previous is not None:
                    self._bytes -= len(previous)
                kept[key] = text
                self._bytes += len(text)
            self._shrink()

    def _shrink(self) -> None:
        # Past the bound, values go oldest first (the smallest keys) from the map loaded
        # least recently, then the next; this one, loaded now, is the last. A map that
        # must shrink keeps its newest values (a model call after a summary loads those),
        # and a later load of it reads only the dropped ones from the file. Dropping whole
        # maps made a session past the bound thrash: loading its window pushed out its
        # chunks, which every model call then read and inflated from the file again.
        while self._bytes > self._max_bytes and self._maps:
            map_key, kept = next(iter(self._maps.items()))
            for key in sorted(kept):
                if self._bytes <= self._max_bytes:
                    return
                self._bytes -= len(kept.pop(key))
            del self._maps[map_key]

    def tracks(self, flow_id: str, name: str) -> bool:
        """Whether values of this map are kept (it was loaded, and not dropped since)."""
        return (flow_id, name) in self._maps

    def committed(self, writes: Sequence[tuple[str, str, str, str | None]]) -> None:
        """Keep each ``(flow_id, name, key, text)`` a transaction wrote and committed, in
        order; a ``None`` text was a delete, forgotten. A map not kept is left unkept."""
        for flow_id, name, key, text in writes:
            if text is None:
                self.forget(flow_id, name, key)
            elif self.tracks(flow_id, name):
                self.keep(flow_id, name, {key: text})

    def forget(self, flow_id: str, name: str, key: str) -> None:
        """Drop one value, written or deleted now."""
        with self._lock:
            kept = self._maps.get((flow_id, name))
            previous = None if kept is None else kept.pop(key, None)
            if previous is not None:
                self._bytes -= len(previous)
