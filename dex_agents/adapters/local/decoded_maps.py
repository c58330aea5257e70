"""Each session's whole-map reads, decoded and put in key order once while their text stays the same.

A ``RunModel`` loads every kept message chunk, and the Steps that store messages
load the whole window. Each chunk is decoded once per process
(``decoded_values.py``), yet every Step still sorted the map's keys, looked each
text up and paired it with its key again: a walk over every chunk at every
model call, so a long session's calls cost more with each chunk that rolled
over. The map's text changes only when a Step writes to it (a chunk only when
messages roll over), so each session's last read of each whole map is kept
with the tuple it gave, and a read of equal text gets that very tuple: one
comparison of two dicts, in C, instead of a walk in Python. A read that only
adds keys after the last read's (a Step stored messages: the window's new
messages have the highest sequences) extends that tuple by the new pairs.
"""

from __future__ import annotations

import threading
import typing
from collections import OrderedDict
from typing import Any, NamedTuple, TypeVar

from dex_agents.adapters.local.decoded_values import CACHED_TYPES, DECODED, DecodedValues
from dex_agents.domain.kept_memory import MemoryRate

T = TypeVar("T")

DEFAULT_MAPS_KEPT = 1024
"""How many whole-map reads are kept, at most: a few maps of each session a process serves."""

DEFAULT_MAP_CHARS_KEPT = 8 * 1024 * 1024
"""How much memory the kept reads take together, at most, in bytes (least recently read
dropped first): a kept read keeps its texts and its pairs alive, and is charged its
texts' characters times the bytes per character that sampled reads took, and a
fixed part (``kept_memory.py``), about two and a half bytes a character; counting the characters alone let the kept
reads take 19 MiB (``bench/session_churn.py``)."""


class _Read(NamedTuple):
    """One kept whole-map read."""

    texts: dict[str, str]
    pairs: tuple[tuple[str, Any], ...]
    chars: int
    charge: int
    """What the read is charged against ``most_chars``: its memory, estimated."""


class DecodedMaps:
    """Per (session, map, value type), the last whole read: its texts by key, the
    ``(key, value)`` pairs in key order it gave, and how many characters it holds.

    A read is charged its characters times the bytes per character that sampled reads
    took in memory, and a fixed part (``measured``), or its characters alone, against
    ``most_chars``.

    Only values of ``CACHED_TYPES`` are kept: they are immutable all the way
    down, so every reader may share them. Thread-safe: Steps read on the event
    loop, RPCs on it or on a store thread.
    """

    def __init__(
        self,
        decoded: DecodedValues = DECODED,
        *,
        entries: int = DEFAULT_MAPS_KEPT,
        most_chars: int = DEFAULT_MAP_CHARS_KEPT,
        measured: bool = True,
    ) -> None:
        self._decoded = decoded
        self._entries = entries
        self._most_chars = most_chars
        self._chars = 0
        self._rate = MemoryRate() if measured else None
        self._kept: OrderedDict[tuple[str, str, Any], _Read] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def instances(
        self, flow_id: str, name: str, texts: dict[str, str], cls: type[T]
    ) -> tuple[tuple[str, T], ...]:
        """Every ``(key, value)`` of ``texts`` (a whole map's JSON by key) in key order,
        each value decoded as ``cls``: the same tuple as the last read of ``flow_id``'s
        map ``name`` when that read's texts were equal, and that tuple extended when
        ``texts`` only adds keys after its own.

        ``texts`` is kept as given: the caller must not change it afterwards.
        """
        if cls not in CACHED_TYPES:  # decoded afresh for each reader, so never kept
            return self._decoded.decode_pairs(sorted(texts.items()), cls)
        key = (flow_id, name, cls)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept.texts == texts:
                self._kept.move_to_end(key)
                return typing.cast(tuple[tuple[str, T], ...], kept.pairs)
        if kept is not None and (added := _appended(kept, texts)) is not None:
            # A Step stored messages: the window is the last read with keys after its own.
            found = kept.pairs + tuple(
                (each, self._decoded.decode(texts[each], cls)) for each in added
            )
            self._keep(key, texts, found, kept.chars + sum(len(texts[each]) for each in added))
            return typing.cast(tuple[tuple[str, T], ...], found)
        found = self._decoded.decode_pairs(sorted(texts.items()), cls)
        self._keep(key, texts, found, sum(map(len, texts.values())))
        return found

    def _keep(
        self,
        key: tuple[str, str, Any],
        texts: dict[str, str],
        found: tuple[Any, ...],
        chars: int,
    ) -> None:
        charge = chars if self._rate is None else self._rate.charge(chars, (texts, found))
        with self._lock:
            previous = self._kept.pop(key, None)
            if previous is not None:
                self._chars -= previous.charge
            if charge > self._most_chars:
                return
            self._kept[key] = _Read(texts, found, chars, charge)
            self._chars += charge
            while len(self._kept) > self._entries or self._chars > self._most_chars:
                _, dropped = self._kept.popitem(last=False)
                self._chars -= dropped.charge

    def clear(self) -> None:
        """Forget every kept read."""
        with self._lock:
            self._kept.clear()
            self._chars = 0


def _appended(kept: _Read, texts: dict[str, str]) -> list[str] | None:
    """The keys of ``texts`` beyond the kept read's, in key order, when ``texts`` holds every
    kept text unchanged and only keys after the kept ones besides; otherwise ``None``."""
    before = kept.texts
    if len(texts) <= len(before) or not before.items() <= texts.items():
        return None
    added = sorted(texts.keys() - before.keys())
    if kept.pairs and added[0] <= kept.pairs[-1][0]:
        return None  # a key among the kept ones: the pairs are sorted again
    return added


DECODED_MAPS = DecodedMaps()
"""This process's kept whole-map reads, shared by every transaction's ``StagedState``."""
