"""The port's ``StateTransaction`` over a Dex handler Context.

Dex stages Attribute writes and Channel publishes in the Context and commits
them with the handler's result, and reads see the handler's own writes, so each
port call maps onto one Dex call. Values cross through ``wire_values``.

Stream events staged here (``write_event``) are held until the handler returns
and then written, just before the result: Dex has no Stream write that commits
with a result, so an event can outlive a result that fails to commit. That is
the closest honest mapping, and ``dex_agents`` treats Streams as best effort.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import dex

from dex_agents.adapters.dex.schema import DexSchema
from dex_agents.adapters.dex.wire_values import from_dex, to_dex
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


class DexState:
    """One Step method's or RPC's view of a session, read from and staged into a Dex Context.

    ``loads`` are the AttributeMap loads the handler declared, so ``instance_keys``
    can answer for instance loads, which Dex's own key listing refuses.
    """

    def __init__(
        self,
        context: dex.Context,
        schema: DexSchema,
        loads: Sequence[MapLoad] = (),
        *,
        writable: bool = True,
    ) -> None:
        self._context = context
        self._schema = schema
        self._loads = tuple(loads)
        self._writable = writable
        self._events: list[tuple[StreamDef[Any], Any]] = []

    @property
    def flow_id(self) -> str:
        """The session ID."""
        return self._context.flow_id

    # -- reads --------------------------------------------------------------

    def get(self, attribute: AttributeDef[T]) -> T | None:
        """The Attribute's value, or ``None`` when it is unset."""
        raw = self._schema.attribute(attribute).get(self._context)
        return None if raw is None else from_dex(attribute.value_type, raw)

    def get_instance(self, attribute_map: AttributeMapDef[T], key: str) -> T | None:
        """One AttributeMap instance's value, or ``None``; ``LookupError`` when not loaded."""
        try:
            raw = self._schema.attribute_map(attribute_map).get(self._context, key)
        except dex.AttributeMapNotLoadedError as error:
            raise LookupError(f"{attribute_map.name}/{key} was not loaded: {error}") from error
        return None if raw is None else from_dex(attribute_map.value_type, raw)

    def instance_keys(self, attribute_map: AttributeMapDef[Any]) -> tuple[str, ...]:
        """The keys of every loaded instance that holds a value, in key order."""
        definition = self._schema.attribute_map(attribute_map)
        try:
            return tuple(definition.get_all_instance_keys(self._context))
        except dex.AttributeMapNotLoadedError:
            pass
        keys = {
            load.key
            for load in self._loads
            if load.key is not None and load.attribute_map.name == attribute_map.name
        }
        if not keys:
            raise LookupError(f"{attribute_map.name} was not loaded")
        return tuple(sorted(key for key in keys if definition.get(self._context, key) is not None))

    def instances(self, attribute_map: AttributeMapDef[T]) -> tuple[tuple[str, T], ...]:
        """Every loaded instance that holds a value, as (key, value), in key order."""
        found = (
            (key, self.get_instance(attribute_map, key))
            for key in self.instance_keys(attribute_map)
        )
        return tuple((key, value) for key, value in found if value is not None)

    def channel_size(self, channel: ChannelDef[Any]) -> int:
        """How many messages wait in a Channel."""
        return self._schema.channel(channel).size(self._context)

    def pending_messages(self, channel: ChannelDef[T]) -> Sequence[ChannelMessage[T]]:
        """The messages waiting in a Channel, oldest first (RPCs that load the Channel)."""
        try:
            pending = self._schema.channel(channel).pending_messages(self._context)
        except dex.ChannelMessagesNotLoadedError as error:
            raise LookupError(f"{channel.name} messages were not loaded: {error}") from error
        return [
            ChannelMessage(message.message_id, from_dex(channel.value_type, message.value))
            for message in pending
        ]

    # -- writes -------------------------------------------------------------

    def set(self, attribute: AttributeDef[T], value: T) -> None:
        """Stage a new value for an Attribute."""
        self._require_writable()
        definition = self._schema.attribute(attribute)
        definition.set(self._context, to_dex(attribute.value_type, value))

    def delete(self, attribute: AttributeDef[Any]) -> None:
        """Stage the deletion of an Attribute."""
        self._require_writable()
        self._schema.attribute(attribute).delete(self._context)

    def set_instance(self, attribute_map: AttributeMapDef[T], key: str, value: T) -> None:
        """Stage a new value for one AttributeMap instance."""
        self._require_writable()
        definition = self._schema.attribute_map(attribute_map)
        definition.set(self._context, key, to_dex(attribute_map.value_type, value))

    def delete_instance(self, attribute_map: AttributeMapDef[Any], key: str) -> None:
        """Stage the deletion of one AttributeMap instance."""
        self._require_writable()
        self._schema.attribute_map(attribute_map).delete(self._context, key)

    def publish(self, channel: ChannelDef[T], value: T) -> None:
        """Stage a message for a Channel."""
        self._require_writable()
        self._schema.channel(channel).publish(self._context, to_dex(channel.value_type, value))

    def publish_to(self, channel_map: ChannelMapDef[T], key: str, value: T) -> None:
        """Stage a message for one ChannelMap instance."""
        self._require_writable()
        definition = self._schema.channel_map(channel_map)
        definition.publish(self._context, key, to_dex(channel_map.value_type, value))

    def delete_message(self, channel: ChannelDef[Any], message_id: str) -> bool:
        """Stage the deletion of a waiting message; ``False`` when it no longer waits."""
        self._require_writable()
        definition = self._schema.channel(channel)
        if definition.find_pending_message(self._context, message_id) is None:
            return False
        definition.delete(self._context, message_id)
        return True

    def write_event(self, stream: StreamDef[T], value: T) -> None:
        """Hold a Stream event until the handler returns (see the module docstring)."""
        self._require_writable()
        self._events.append((stream, value))

    def staged_events(self) -> list[tuple[StreamDef[Any], Any]]:
        """The events ``write_event`` held, oldest first."""
        return list(self._events)

    def _require_writable(self) -> None:
        if not self._writable:
            raise PermissionError("a wait phase reads state; it cannot write")
