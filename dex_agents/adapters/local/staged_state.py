"""A transaction's view of a session's state: reads from a source, writes staged until commit.

A Step's execute phase reads a snapshot taken when its attempt started; an RPC
reads the store inside its own transaction. Either way writes, publishes and
events are staged here and applied in one store transaction with the result.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dex_agents.adapters.local.decoded_maps import DECODED_MAPS
from dex_agents.adapters.local.decoded_values import CACHED_TYPES, DECODED
from dex_agents.adapters.local.state_sources import (
    StateSource,
)
from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports.engine import MapLoad
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
    ChannelMessage,
    StreamDef,
)

T = TypeVar("T")

_SINGLETON = ""


@dataclass(frozen=True)
class Publish:
    """A staged Channel message."""

    channel: str
    key: str
    value: str


class StagedState:
    """A ``StateTransaction``: reads through staged writes to a source; writes wait for commit."""

    def __init__(
        self,
        flow_id: str,
        source: StateSource,
        loads: Sequence[MapLoad],
        channel_loads: Sequence[ChannelDef[Any]] | None = None,
    ) -> None:
        self._flow_id = flow_id
        self._source = source
        # None: a Step, which never lists waiting messages; an RPC names its Channels.
        self._channel_loads = (
            None if channel_loads is None else {channel.name for channel in channel_loads}
        )
        self._whole_maps = {load.attribute_map.name for load in loads if load.key is None}
        # Map name -> the keys loaded one by one: a Step that reads the message window asks
        # for one map's keys many times, and a set of (name, key) pairs is a scan each time.
        self._instances: dict[str, set[str]] = {}
        for load in loads:
            if load.key:
                self._instances.setdefault(load.attribute_map.name, set()).add(load.key)
        self.writes: dict[tuple[str, str], str | None] = {}
        # A map's instances as last read, by map name, with the value type they were decoded
        # as; dropped when a write to the map is staged. A Step reads the message window and
        # the tool calls several times between its writes.
        self._read_instances: dict[str, tuple[Any, tuple[tuple[str, Any], ...]]] = {}
        self.publishes: list[Publish] = []
        self.deleted_messages: list[str] = []
        self.events: list[tuple[StreamDef[Any], str]] = []
        # A value and its canonical JSON, which a publish of that very object writes.
        self._known_text: tuple[object, str] | None = None

    @property
    def flow_id(self) -> str:
        """The session ID."""
        return self._flow_id

    @property
    def whole_maps(self) -> frozenset[str]:
        """The AttributeMaps this transaction loaded whole."""
        return frozenset(self._whole_maps)

    def loaded_instance_keys(self, attribute_map: str) -> tuple[str, ...]:
        """The instance keys of ``attribute_map`` this transaction loaded one by one."""
        return tuple(sorted(self._instances.get(attribute_map, ())))

    @property
    def has_effects(self) -> bool:
        """Whether anything was staged that a commit would write."""
        return bool(self.writes or self.publishes or self.deleted_messages or self.events)

    def _check_loaded(self, attribute_map: AttributeMapDef[Any], key: str | None) -> None:
        name = attribute_map.name
        if name in self._whole_maps or (key is not None and key in self._instances.get(name, ())):
            return
        what = f"instance {key!r} of AttributeMap {name}" if key else f"AttributeMap {name}"
        raise LookupError(f"{what} was not loaded; declare it in the Step's or RPC's loads")

    def _check_channel_loaded(self, channel: ChannelDef[Any]) -> None:
        if self._channel_loads is not None and channel.name not in self._channel_loads:
            raise LookupError(
                f"the messages of Channel {channel.name} were not loaded; "
                "declare it in the RPC's channel_loads"
            )

    def _read(self, name: str, key: str) -> str | None:
        if (name, key) in self.writes:
            return self.writes[(name, key)]
        return self._source.value(name, key)

    def get(self, attribute: AttributeDef[T]) -> T | None:
        """The Attribute's value, or ``None`` when it is unset."""
        text = self._read(attribute.name, _SINGLETON)
        return None if text is None else DECODED.decode(text, attribute.value_type)

    def get_instance(self, attribute_map: AttributeMapDef[T], key: str) -> T | None:
        """One loaded AttributeMap instance's value, or ``None`` when it is unset."""
        self._check_loaded(attribute_map, key)
        text = self._read(attribute_map.name, key)
        return None if text is None else DECODED.decode(text, attribute_map.value_type)

    def instance_keys(self, attribute_map: AttributeMapDef[Any]) -> tuple[str, ...]:
        """The keys of every loaded instance, with this transaction's writes applied, in key order."""
        name = attribute_map.name
        if name in self._whole_maps:
            keys = set(self._source.values(name))
        else:
            loaded = self._instances.get(name, ())
            keys = {key for key in loaded if self._source.value(name, key) is not None}
        for (written_name, key), value in self.writes.items():
            if written_name == name:
                if value is None:
                    keys.discard(key)
                else:
                    keys.add(key)
        return tuple(sorted(keys))

    def instances(self, attribute_map: AttributeMapDef[T]) -> tuple[tuple[str, T], ...]:
        """Every loaded instance that holds a value, as (key, value), in key order.

        One pass for the whole map: a Step that reads the message window reads
        dozens of instances, and each ``get_instance`` checks its load again. Read
        again with no write to the map staged since, it is the same tuple, when its
        values are shared ones anyway (``CACHED_TYPES``: immutable all the way down).
        """
        name = attribute_map.name
        value_type = attribute_map.value_type
        kept = self._read_instances.get(name)
        if kept is not None and kept[0] is value_type:
            return typing.cast(tuple[tuple[str, T], ...], kept[1])
        if name in self._whole_maps:
            # The whole map in one copy with this transaction's writes over it: a model call
            # reads every chunk of a long session, and a read per key is a call chain per key.
            texts = self._source.values(name)
            for (written, key), value in self.writes.items():
                if written != name:
                    continue
                if value is None:
                    texts.pop(key, None)
                else:
                    texts[key] = value
            # Equal text as this session's last read of the map gives that read's tuple.
            found = DECODED_MAPS.instances(self._flow_id, name, texts, value_type)
        else:
            if name not in self._instances:
                self._check_loaded(attribute_map, None)  # raises: nothing of the map was loaded
            read = [(key, self._read(name, key)) for key in self.instance_keys(attribute_map)]
            held = [(key, text) for key, text in read if text is not None]
            found = DECODED.decode_pairs(held, value_type)
        if value_type in CACHED_TYPES:
            self._read_instances[name] = (value_type, found)
        return found

    def channel_size(self, channel: ChannelDef[Any]) -> int:
        """How many messages wait in a Channel (as read when the transaction began)."""
        return self._source.channel_size(channel.name)

    def pending_messages(self, channel: ChannelDef[T]) -> Sequence[ChannelMessage[T]]:
        """The messages waiting in a Channel, oldest first, less those this transaction deleted."""
        self._check_channel_loaded(channel)
        return [
            ChannelMessage(row.message_id, from_json(row.value, channel.value_type))
            for row in self._source.pending(channel.name)
            if row.message_id not in self.deleted_messages
        ]

    def set(self, attribute: AttributeDef[T], value: T) -> None:
        """Stage a new value for an Attribute."""
        text = self.writes[(attribute.name, _SINGLETON)] = to_json(value)
        DECODED.written(text, attribute.value_type, value)

    def delete(self, attribute: AttributeDef[Any]) -> None:
        """Stage the deletion of an Attribute."""
        self.writes[(attribute.name, _SINGLETON)] = None

    def set_instance(self, attribute_map: AttributeMapDef[T], key: str, value: T) -> None:
        """Stage a new value for one AttributeMap instance."""
        _check_key(attribute_map.name, key)
        self._read_instances.pop(attribute_map.name, None)
        text = self.writes[(attribute_map.name, key)] = to_json(value)
        DECODED.written(text, attribute_map.value_type, value)

    def delete_instance(self, attribute_map: AttributeMapDef[Any], key: str) -> None:
        """Stage the deletion of one AttributeMap instance."""
        _check_key(attribute_map.name, key)
        self._read_instances.pop(attribute_map.name, None)
        self.writes[(attribute_map.name, key)] = None

    def know_text(self, value: object, text: str) -> None:
        """``text`` is ``value``'s canonical JSON (``to_json``), and ``value`` is immutable: a
        publish of that very object writes ``text`` (an RPC's input, which its handler
        publishes as it came, was encoded on its way in)."""
        self._known_text = (value, text)

    def _message_text(self, value: object) -> str:
        known = self._known_text
        if known is not None and known[0] is value:
            return known[1]
        return to_json(value)

    def publish(self, channel: ChannelDef[T], value: T) -> None:
        """Stage a message for a Channel."""
        self.publishes.append(Publish(channel.name, _SINGLETON, self._message_text(value)))

    def publish_to(self, channel_map: ChannelMapDef[T], key: str, value: T) -> None:
        """Stage a message for one ChannelMap instance."""
        _check_key(channel_map.name, key)
        self.publishes.append(Publish(channel_map.name, key, self._message_text(value)))

    def delete_message(self, channel: ChannelDef[Any], message_id: str) -> bool:
        """Stage the deletion of a waiting message; ``False`` when it no longer waits."""
        self._check_channel_loaded(channel)
        waiting = {row.message_id for row in self._source.deletable(channel.name)}
        if message_id not in waiting or message_id in self.deleted_messages:
            return False
        self.deleted_messages.append(message_id)
        return True

    def write_event(self, stream: StreamDef[T], value: T) -> None:
        """Stage an event for the session's Stream."""
        text = to_json(value)
        DECODED.written(text, stream.value_type, value)
        self.events.append((stream, text))


def _check_key(name: str, key: str) -> None:
    if not key or "/" in key:
        raise ValueError(f"{name}: instance key {key!r} must be non-empty and contain no '/'")
