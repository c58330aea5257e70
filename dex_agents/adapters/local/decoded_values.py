"""Decode each stored message once per process, not once per Step.

Every Step that stores messages loads the whole window, and reads of the
session (snapshots, pages, compaction) load every kept chunk, so the same JSON
text was decoded again for every Step of every turn: the work grew with the
session. A stored message never changes at its key, and a chunk that rolled
over is immutable, so their decoded values are shared, keyed by their exact
text. The message index, the ``AgentState`` and the tool call records change
during a turn but are read by most of its Steps. Only frozen values made of
immutable parts are cached (``CACHED_TYPES``); anything holding a ``dict`` is
decoded afresh, so no caller can change another's.
"""

from __future__ import annotations

import threading
import typing
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, TypeVar

import attrs

from dex_agents.adapters.local.store_errors import StoredValueError
from dex_agents.domain.context_summary import ContextSummary
from dex_agents.domain.errors import WireFormatError
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.exact_values import exactly_decodable
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.kept_memory import MemoryRate
from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.plans import AgentPlan, PlanExecutionRequest
from dex_agents.domain.state import AgentState, TurnCancellationRequest, TurnReplySequence
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.wire import from_json

T = TypeVar("T")

CACHED_TYPES: frozenset[Any] = frozenset(
    {
        AgentMessage,
        AgentMessageChunk,
        AgentMessageIndex,
        # Read by nearly every Step of a turn, and unchanged between most of them.
        AgentState,
        AgentToolCall,
        AgentUsage,
        AgentPlan,
        PlanExecutionRequest,
        ContextSummary,
        TurnReplySequence,
        TurnCancellationRequest,
        tuple[AgentInterrupt, ...],
        str,
    }
)
"""The value types whose decoded values are shared: frozen, and immutable all the way down."""

WRITTEN_TYPES: frozenset[Any] = frozenset(cls for cls in CACHED_TYPES if attrs.has(cls))
"""The value types whose written objects stand for their decoded ones (``DecodedValues.written``).

Each is frozen all the way down (as every one of ``CACHED_TYPES``), and JSON
gives back each of its fields equal: a Step that stores a message or the
``AgentState`` and the Step that reads it next share one object, so it is not
decoded again, nor a message sized again (``wire.json_size`` keeps its size by object).
"""

WRITTEN_ONLY_TYPES: frozenset[Any] = frozenset({AgentEvent})
"""Value types whose written objects are kept when frozen, though decodes of them are not.

An ``AgentEvent`` with its type's payload class is frozen all the way down, and
a client that follows a session reads each event its own process wrote; an event
of a type of its own carries a mapping, so it is never shared.
"""


def _stands_for_its_decode(cls: Any, value: object) -> bool:
    if cls not in WRITTEN_TYPES and cls not in WRITTEN_ONLY_TYPES:
        return False
    # Only a value its text gives back type for type: a Step may have stored a float
    # where an int belongs, which the file's next reader refuses, and this process must
    # refuse it as well.
    return exactly_decodable(value, cls)


DEFAULT_CACHE_BYTES = 32 * 1024 * 1024
"""How much memory the kept texts and their decoded values take, at most.

Each entry is charged its text's characters times the bytes per character that
sampled entries of its type took, text and decoded objects together, and a fixed
part (``kept_memory.py``): two to three times the text for messages. Counting the
text alone let the cache keep about twice this bound, 61 MiB at its fill
(``bench/session_churn.py``)."""

PREFIX_TRIES = 4
"""How many texts shorter a kept sequence ``decode_all`` looks for when the whole is not kept."""

DEFAULT_SEQUENCES_KEPT = 256
"""How many sequences of texts read together (``decode_all``) are kept whole, at most."""


class DecodedValues:
    """A least-recently-used map from (type, JSON text) to the decoded value, bounded in the
    memory the texts and values take (``DEFAULT_CACHE_BYTES``); a value charged more than
    the whole bound is not kept.

    Thread-safe: Steps read on the event loop, RPCs on it or on the store thread.
    """

    def __init__(
        self, max_bytes: int = DEFAULT_CACHE_BYTES, max_sequences: int = DEFAULT_SEQUENCES_KEPT
    ) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._values: OrderedDict[tuple[Any, str], Any] = OrderedDict()
        self._charges: dict[tuple[Any, str], int] = {}
        self._rates: dict[Any, MemoryRate] = {}
        self._max_sequences = max_sequences
        self._sequence_bytes = 0
        self._sequences: OrderedDict[tuple[Any, tuple[str, ...]], tuple[Any, ...]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def sequences_kept(self) -> int:
        """How many sequences ``decode_all`` keeps whole now."""
        return len(self._sequences)

    def decode(self, text: str, cls: type[T], store: object = None) -> T:
        """``from_json(text, cls)``, shared with earlier decodes of the same text.

        ``store`` is named in the error for text that does not decode (``from_stored``).
        """
        if cls not in CACHED_TYPES or len(text) > self._max_bytes // 4:
            if cls in WRITTEN_ONLY_TYPES:
                found = self._kept((cls, text))
                if found is not None:
                    return typing.cast(T, found)
            return from_stored(text, cls, store)
        key = (cls, text)
        found = self._kept(key)
        if found is not None:
            return typing.cast(T, found)
        value = from_stored(text, cls, store)
        self._keep(key, value)
        return value

    def written(self, text: str, cls: type[T], value: T) -> None:
        """Keep ``value`` as the decoded value of ``text``, the JSON it was just written as,
        when nothing in it can change (``WRITTEN_TYPES``, or an event with a typed
        payload): the next read of the text is the object itself, not a decode of it."""
        if len(text) <= self._max_bytes // 4 and _stands_for_its_decode(cls, value):
            self._keep((cls, text), value)

    def _kept(self, key: tuple[Any, str]) -> Any:
        with self._lock:
            found = self._values.get(key)
            if found is not None:
                self._values.move_to_end(key)
            return found

    def _keep(self, key: tuple[Any, str], value: Any) -> None:
        with self._lock:
            if key in self._values:
                return
            rate = self._rates.get(key[0])
            if rate is None:  # per type: a message takes other bytes a character than a state
                rate = self._rates[key[0]] = MemoryRate()
            charge = rate.charge(len(key[1]), (key[1], value))
            if charge > self._max_bytes:
                return
            self._values[key] = value
            self._charges[key] = charge
            self._bytes += charge
            while self._bytes > self._max_bytes:
                evicted, _ = self._values.popitem(last=False)
                self._bytes -= self._charges.pop(evicted)

    def decode_pairs(
        self, held: Sequence[tuple[str, str]], cls: type[T]
    ) -> tuple[tuple[str, T], ...]:
        """Each ``(key, text)`` of ``held`` as ``(key, value)``, in order, the texts decoded
        together as ``decode_all`` decodes them: an AttributeMap's instances as read."""
        values = self.decode_all([text for _, text in held], cls)
        return tuple((key, value) for (key, _), value in zip(held, values, strict=True))

    def decode_all(self, texts: Sequence[str], cls: type[T]) -> list[T]:
        """``decode`` of each of ``texts``, in order, looked up under one hold of the lock.

        The same sequence again is one lookup: a session's message window is read
        whole by several Steps and RPCs between two commits that change it, and a
        lookup per message was most of what such a read cost. A commit adds a few
        messages to the window, so a sequence that extends a kept one by up to
        ``PREFIX_TRIES`` texts looks up only those.
        """
        if cls not in CACHED_TYPES:
            return [from_stored(text, cls) for text in texts]
        whole = (cls, tuple(texts))
        found: list[T | None] = []
        with self._lock:
            kept = self._sequences.get(whole)
            if kept is not None:
                self._sequences.move_to_end(whole)
                return list(kept)
            for back in range(1, min(PREFIX_TRIES, len(texts) - 1) + 1):
                prefix = (cls, whole[1][:-back])
                kept = self._sequences.get(prefix)
                if kept is not None:
                    self._sequences.move_to_end(prefix)
                    found.extend(kept)
                    break
            for text in texts[len(found) :]:
                value = self._values.get((cls, text))
                if value is not None:
                    self._values.move_to_end((cls, text))
                found.append(value)
        values = [
            self.decode(text, cls) if value is None else value
            for text, value in zip(texts, found, strict=True)
        ]
        self._keep_sequence(whole, values)
        return values

    def _keep_sequence(self, whole: tuple[Any, tuple[str, ...]], values: list[Any]) -> None:
        # The kept texts stay alive with their sequence, so the sequences are bounded in
        # bytes too: a quarter of the cache's.
        size = sum(map(len, whole[1]))
        limit = self._max_bytes // 4
        if size > limit:
            return
        with self._lock:
            if whole in self._sequences:
                return
            self._sequences[whole] = tuple(values)
            self._sequence_bytes += size
            while len(self._sequences) > self._max_sequences or self._sequence_bytes > limit:
                (_, evicted), _ = self._sequences.popitem(last=False)
                self._sequence_bytes -= sum(map(len, evicted))


def from_stored(text: str, cls: type[T], store: object = None) -> T:
    """``from_json`` of text read from a store; ``StoredValueError`` when it does not decode.

    Only the engine writes stored values, and always valid ones, so text that no
    longer decodes was damaged in the file (or written by another program).
    ``store`` (its ``path``) is named in the error when the read ran outside a
    store transaction, which would otherwise name it.
    """
    try:
        return from_json(text, cls)
    except WireFormatError as error:
        path = getattr(store, "path", None)
        where = "a stored value" if path is None else f"{path} is damaged: a stored value"
        raise StoredValueError(f"{where} does not decode: {error}") from None


DECODED = DecodedValues()
"""This process's cache, shared by every engine it opens (values are keyed by content)."""
