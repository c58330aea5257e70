"""Where a transaction's view of a session's state reads from: a snapshot taken when an
attempt started, or the store inside an RPC's own transaction (``staged_state`` stages
the writes)."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from dex_agents.adapters.local import status_members
from dex_agents.adapters.local.codec import taken_messages
from dex_agents.ports.engine import MapLoad
from dex_agents.ports.flow_rows import MessageRow
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.persistence import (
    AttributeDef,
    ChannelDef,
)

T = TypeVar("T")

_SINGLETON = ""


class StateSource(Protocol):
    """Where a staged state reads committed values from."""

    def value(self, name: str, key: str) -> str | None:
        """One value's JSON text, or ``None``."""
        ...

    def values(self, name: str) -> dict[str, str]:
        """Every instance of an AttributeMap, in a new dict the caller may change."""
        ...

    def channel_size(self, name: str) -> int:
        """How many messages wait in a Channel."""
        ...

    def pending(self, name: str) -> Sequence[MessageRow]:
        """The messages waiting in a Channel; ``LookupError`` where the phase cannot list them."""
        ...

    def deletable(self, name: str) -> Sequence[MessageRow]:
        """The waiting messages no wait has taken yet; ``LookupError`` as for ``pending``."""
        ...


@dataclass
class Snapshot:
    """Committed values read in one store transaction when an attempt started."""

    values: dict[tuple[str, str], str] = field(default_factory=dict)
    maps: dict[str, dict[str, str]] = field(default_factory=dict)
    channel_sizes: dict[str, int] = field(default_factory=dict)

    def value(self, name: str, key: str) -> str | None:
        """One value's JSON text, or ``None``."""
        if key == _SINGLETON:
            return self.values.get((name, key))
        return self.maps.get(name, {}).get(key)

    def values_of(self, name: str) -> dict[str, str]:
        """Every loaded instance of an AttributeMap."""
        return dict(self.maps.get(name, {}))


class SnapshotSource:
    """A ``StateSource`` over a snapshot: Steps see sizes of Channels but not their messages."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def value(self, name: str, key: str) -> str | None:
        """One value's JSON text from the snapshot."""
        return self._snapshot.value(name, key)

    def values(self, name: str) -> dict[str, str]:
        """Every loaded instance of an AttributeMap."""
        return self._snapshot.values_of(name)

    def channel_size(self, name: str) -> int:
        """The Channel's size when the attempt started."""
        return self._snapshot.channel_sizes.get(name, 0)

    def pending(self, name: str) -> Sequence[MessageRow]:
        """Steps cannot list Channel messages, as in Dex; their waits consume them."""
        raise LookupError(f"a Step cannot list the messages of Channel {name}; only RPCs can")

    def deletable(self, name: str) -> Sequence[MessageRow]:
        """Steps cannot delete Channel messages either."""
        return self.pending(name)


class TransactionSource:
    """A ``StateSource`` that reads the store inside the current transaction (RPCs)."""

    def __init__(
        self,
        tx: StoreTransaction,
        flow_id: str,
        singletons: Sequence[str] = (),
        write_once_maps: Collection[str] = (),
    ) -> None:
        self._tx = tx
        self._flow_id = flow_id
        self._write_once_maps = write_once_maps
        # An RPC reads before it writes, and its writes are staged until the end of its
        # transaction, so what it has read stays true while it reads: each value is read once,
        # and the singleton Attributes of ``singletons`` all in the first read of one.
        self._values: dict[tuple[str, str], str | None] = {}
        self._maps: dict[str, dict[str, str]] = {}
        self._singletons: Sequence[str] | None = singletons or None

    def value(self, name: str, key: str) -> str | None:
        """One value's JSON text as committed so far."""
        whole = self._maps.get(name)
        if whole is not None:
            return whole.get(key)
        if key == _SINGLETON and self._singletons is not None and name in self._singletons:
            found = self._tx.get_singletons(self._flow_id, self._singletons)
            self._values.update({(each, _SINGLETON): found.get(each) for each in self._singletons})
            self._singletons = None
        try:
            return self._values[(name, key)]
        except KeyError:
            text = self._tx.get_value(self._flow_id, name, key)
            self._values[(name, key)] = text
            return text

    def values(self, name: str) -> dict[str, str]:
        """Every instance of an AttributeMap."""
        whole = self._maps.get(name)
        if whole is None:
            whole = self._maps[name] = _whole_map(
                self._tx, self._flow_id, name, write_once=name in self._write_once_maps
            )
        return dict(whole)

    def channel_size(self, name: str) -> int:
        """How many messages wait in the Channel now."""
        return len(self._tx.pending_messages(self._flow_id, name, _SINGLETON))

    def pending(self, name: str) -> Sequence[MessageRow]:
        """The messages waiting in the Channel now, those a wait took but has not committed included.

        A wait takes its messages when it ends, and the Step that took them stores
        them when its execute phase commits. Listing them until then means a
        message the session accepted is always in one of the two places, so a
        snapshot never shows an idle session that has just taken a message.
        """
        waiting = self._tx.pending_messages(self._flow_id, name, _SINGLETON)
        taken = [
            message
            for row in self._tx.flow_executions(
                self._flow_id, [status_members.READY, status_members.RUNNING]
            )
            for message in taken_messages(row)
            if message.channel == name and message.key == _SINGLETON
        ]
        if not taken:
            return waiting
        return sorted([*waiting, *taken], key=lambda message: message.seq)

    def deletable(self, name: str) -> Sequence[MessageRow]:
        """The messages no wait has taken: only these can still be deleted."""
        return self._tx.pending_messages(self._flow_id, name, _SINGLETON)


@functools.lru_cache(maxsize=64)
def _schema_names(schema: tuple[Any, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    # A Flow's schema never changes, and every claim reads a snapshot of it.
    attributes = tuple(item.name for item in schema if isinstance(item, AttributeDef))
    channels = tuple(item.name for item in schema if isinstance(item, ChannelDef))
    return attributes, channels


def read_snapshot(
    tx: StoreTransaction,
    flow_id: str,
    schema: Sequence[Any],
    loads: Sequence[MapLoad],
) -> Snapshot:
    """Read every singleton Attribute, the loaded maps and every Channel's size, in one transaction."""
    snapshot = Snapshot()
    attributes, channels = _schema_names(tuple(schema))
    for name, value in tx.get_singletons(flow_id, attributes).items():
        snapshot.values[(name, _SINGLETON)] = value
    counts = tx.pending_counts(flow_id, channels)
    for name in channels:
        snapshot.channel_sizes[name] = counts.get(name, 0)
    # Instances of a write-once map loaded by key are read together, through what the store kept.
    keyed: dict[str, list[str]] = {}
    for load in loads:
        name = load.attribute_map.name
        loaded = snapshot.maps.setdefault(name, {})
        if load.key is not None and load.attribute_map.write_once:
            keyed.setdefault(name, []).append(load.key)
        elif load.key is None:
            loaded.update(_whole_map(tx, flow_id, name, write_once=load.attribute_map.write_once))
        else:
            text = tx.get_value(flow_id, name, load.key)
            if text is not None:
                loaded[load.key] = text
    for name, keys in keyed.items():
        snapshot.maps[name].update(tx.get_write_once_values(flow_id, name, keys))
    return snapshot


def _whole_map(
    tx: StoreTransaction, flow_id: str, name: str, *, write_once: bool
) -> dict[str, str]:
    # A write-once map is read through what the store keeps of it, by Steps and RPCs alike:
    # the same text objects, so decoding them again is one lookup, not a compare of every
    # message's text.
    if write_once:
        return tx.get_write_once_values(flow_id, name)
    return tx.get_values(flow_id, name)
