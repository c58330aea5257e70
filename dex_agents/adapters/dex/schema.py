"""The session's persistence declared to Dex: one Dex definition per port declaration.

Names and kinds are the port's (the spec's persistence table); value types are
what ``wire_values.dex_type`` says Dex can carry. Dex identifies a definition by
object identity, so one ``DexSchema`` is built per Flow and every Step, RPC and
client call of that Flow uses its objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import dex

from dex_agents.adapters.dex.wire_values import dex_type
from dex_agents.ports.engine import AttributeLock, MapLoad
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
    StreamDef,
)

_D = TypeVar("_D")

PortDeclaration = AttributeDef[Any] | AttributeMapDef[Any] | ChannelDef[Any] | ChannelMapDef[Any]
DexDeclaration = dex.Attribute[Any] | dex.AttributeMap[Any] | dex.Channel[Any] | dex.ChannelMap[Any]


def _declare(item: PortDeclaration) -> DexDeclaration:
    value_type = dex_type(item.value_type)
    if isinstance(item, AttributeDef | AttributeMapDef) and value_type in (int, bool):
        # Dex reads an unset int or bool Attribute as 0 or False, so "unset" (None
        # to the port) could not be told apart from a stored value.
        raise ValueError(
            f"{item.name}: an {type(item).__name__} of {value_type.__name__} cannot be told "
            "unset on Dex; declare a str or a session value type"
        )
    if isinstance(item, AttributeDef):
        return dex.Attribute(item.name, value_type)
    if isinstance(item, AttributeMapDef):
        return dex.AttributeMap(item.name, value_type)
    if isinstance(item, ChannelDef):
        return dex.Channel(item.name, value_type)
    return dex.ChannelMap(item.name, value_type)


@dataclass(frozen=True)
class DexSchema:
    """The Dex definitions of one Flow type, found by the port declaration's name."""

    declarations: Mapping[str, PortDeclaration]
    definitions: Mapping[str, DexDeclaration]
    stream_declaration: StreamDef[Any] | None
    stream: dex.Stream[Any] | None

    def attribute(self, item: AttributeDef[Any]) -> dex.Attribute[Any]:
        """The Dex Attribute of a port Attribute."""
        return self._typed(item, dex.Attribute)

    def attribute_map(self, item: AttributeMapDef[Any]) -> dex.AttributeMap[Any]:
        """The Dex AttributeMap of a port AttributeMap."""
        return self._typed(item, dex.AttributeMap)

    def channel(self, item: ChannelDef[Any]) -> dex.Channel[Any]:
        """The Dex Channel of a port Channel."""
        return self._typed(item, dex.Channel)

    def channel_map(self, item: ChannelMapDef[Any]) -> dex.ChannelMap[Any]:
        """The Dex ChannelMap of a port ChannelMap."""
        return self._typed(item, dex.ChannelMap)

    def declaration(self, name: str) -> PortDeclaration:
        """The port declaration named ``name``."""
        try:
            return self.declarations[name]
        except KeyError:
            raise LookupError(f"{name} is not declared by this Flow's schema") from None

    def lock(self, lock: AttributeLock) -> dex.AttributeLock:
        """The Dex lock of a port lock."""
        if isinstance(lock.attribute, AttributeMapDef):
            if lock.key is None:
                raise ValueError(f"a lock on AttributeMap {lock.attribute.name} needs a key")
            return self.attribute_map(lock.attribute).lock(lock.key)
        return self.attribute(lock.attribute).lock()

    def persistence_schema(self) -> dex.PersistenceSchema:
        """The Flow's ``PersistenceSchema``: every declaration and the event Stream."""
        streams = () if self.stream is None else (self.stream,)
        return dex.PersistenceSchema.of(*self.definitions.values(), *streams)

    def _typed(self, item: PortDeclaration, kind: type[_D]) -> _D:
        definition = self.definitions.get(item.name)
        if definition is None or self.declarations[item.name] is not item:
            raise LookupError(f"{item.name} is not declared by this Flow's schema")
        if not isinstance(definition, kind):
            raise TypeError(f"{item.name} is a {type(definition).__name__}, not a {kind.__name__}")
        return definition


def map_loads(schema: DexSchema, loads: Sequence[MapLoad]) -> tuple[Any, Any]:
    """Port ``MapLoad``s as Dex whole-map loads and instance loads."""
    whole = tuple(schema.attribute_map(load.attribute_map) for load in loads if load.key is None)
    instances = tuple(
        schema.attribute_map(load.attribute_map).load(load.key)
        for load in loads
        if load.key is not None
    )
    return whole, instances


def build_dex_schema(
    declarations: Sequence[PortDeclaration], stream: StreamDef[Any] | None
) -> DexSchema:
    """Declare a Flow type's persistence to Dex, refusing duplicate names as Dex would."""
    by_name: dict[str, PortDeclaration] = {}
    for item in declarations:
        if item.name in by_name or (stream is not None and item.name == stream.name):
            raise ValueError(f"duplicate persistence name {item.name}")
        by_name[item.name] = item
    dex_stream = (
        None
        if stream is None
        else dex.Stream(stream.name, dex_type(stream.value_type), stream.capacity_bytes)
    )
    return DexSchema(
        declarations=by_name,
        definitions={name: _declare(item) for name, item in by_name.items()},
        stream_declaration=stream,
        stream=dex_stream,
    )
