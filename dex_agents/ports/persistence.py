"""The persistence port: declared state and the transaction a Step or an RPC works in.

A session's durable state is declared once, engine-neutrally, as Attributes,
AttributeMaps, Channels, ChannelMaps and a Stream, with the names of the spec's
persistence table. An engine (the embedded SQLite engine, or Dex through its
adapter) maps each declaration onto its own storage and hands a Step's execute
phase, or an RPC, a ``StateTransaction``: reads see the state as it was committed
when the transaction began plus this transaction's own writes; writes, channel
publishes and stream events are staged and commit atomically with the Step's
result, or not at all.

Only values cross this boundary: every declared value type must encode to the
JSON wire form of ``dex_agents.domain.wire``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


def _check_name(kind: str, name: str) -> None:
    # Dex refuses names with "/" and empty names; refusing them here keeps a schema
    # that works on the embedded engine from failing only once it reaches Dex.
    if not name or "/" in name:
        raise ValueError(f"{kind} name {name!r} must be non-empty and contain no '/'")


@dataclass(frozen=True, eq=False)
class AttributeDef(Generic[T]):
    """A singleton value of a session (a Dex ``Attribute``)."""

    name: str
    value_type: Any

    def __post_init__(self) -> None:
        _check_name("Attribute", self.name)


@dataclass(frozen=True, eq=False)
class AttributeMapDef(Generic[T]):
    """Values of a session keyed by instance key (a Dex ``AttributeMap``).

    Instance keys are non-empty and contain no ``/``. ``write_once`` declares
    that an instance, once set, is never set again (only deleted, and its key
    never reused), so an engine may keep the text it has read.
    """

    name: str
    value_type: Any
    write_once: bool = False

    def __post_init__(self) -> None:
        _check_name("AttributeMap", self.name)


@dataclass(frozen=True, eq=False)
class ChannelDef(Generic[T]):
    """A durable FIFO of messages, each consumed once by one winning wait (a Dex ``Channel``)."""

    name: str
    value_type: Any

    def __post_init__(self) -> None:
        _check_name("Channel", self.name)


@dataclass(frozen=True, eq=False)
class ChannelMapDef(Generic[T]):
    """A durable FIFO per instance key (a Dex ``ChannelMap``)."""

    name: str
    value_type: Any

    def __post_init__(self) -> None:
        _check_name("ChannelMap", self.name)


@dataclass(frozen=True, eq=False)
class StreamDef(Generic[T]):
    """A best-effort, resumable event stream per session (a Dex ``Stream``).

    ``capacity_bytes`` is an approximate budget shared by every session of one
    Flow type; old events are trimmed past it.
    """

    name: str
    value_type: Any
    capacity_bytes: int

    def __post_init__(self) -> None:
        _check_name("Stream", self.name)
        if self.capacity_bytes <= 0:
            raise ValueError(f"Stream {self.name} capacity_bytes must be positive")


@dataclass(frozen=True)
class ChannelMessage(Generic[T]):
    """A message still waiting in a Channel, with the ID an RPC uses to find or delete it."""

    message_id: str
    value: T


class StateReader(Protocol):
    """Reads of one transaction's view of a session's state.

    An AttributeMap instance is readable only when the Step or RPC loaded it (or
    the whole map); reading one that was not loaded raises ``LookupError``, so a
    Step never acts on state it did not declare.
    """

    @property
    def flow_id(self) -> str:
        """The session ID."""
        ...

    def get(self, attribute: AttributeDef[T]) -> T | None:
        """The Attribute's value, or ``None`` when it is unset."""
        ...

    def get_instance(self, attribute_map: AttributeMapDef[T], key: str) -> T | None:
        """One AttributeMap instance's value, or ``None`` when it is unset."""
        ...

    def instance_keys(self, attribute_map: AttributeMapDef[Any]) -> tuple[str, ...]:
        """The keys of every loaded instance of an AttributeMap, in key order."""
        ...

    def instances(self, attribute_map: AttributeMapDef[T]) -> tuple[tuple[str, T], ...]:
        """Every loaded instance of an AttributeMap that holds a value, as (key, value), in key order."""
        ...

    def channel_size(self, channel: ChannelDef[Any]) -> int:
        """How many messages wait in a Channel."""
        ...

    def pending_messages(self, channel: ChannelDef[T]) -> Sequence[ChannelMessage[T]]:
        """The messages waiting in a Channel, oldest first (RPCs that load the Channel)."""
        ...


class StateTransaction(StateReader, Protocol):
    """The staged writes of a Step's execute phase or an RPC, committed atomically with it."""

    def set(self, attribute: AttributeDef[T], value: T) -> None:
        """Stage a new value for an Attribute."""
        ...

    def delete(self, attribute: AttributeDef[Any]) -> None:
        """Stage the deletion of an Attribute."""
        ...

    def set_instance(self, attribute_map: AttributeMapDef[T], key: str, value: T) -> None:
        """Stage a new value for one AttributeMap instance."""
        ...

    def delete_instance(self, attribute_map: AttributeMapDef[Any], key: str) -> None:
        """Stage the deletion of one AttributeMap instance."""
        ...

    def publish(self, channel: ChannelDef[T], value: T) -> None:
        """Stage a message for a Channel; it is appended when the transaction commits."""
        ...

    def publish_to(self, channel_map: ChannelMapDef[T], key: str, value: T) -> None:
        """Stage a message for one ChannelMap instance."""
        ...

    def delete_message(self, channel: ChannelDef[Any], message_id: str) -> bool:
        """Stage the deletion of a waiting message; ``False`` when it no longer waits."""
        ...

    def write_event(self, stream: StreamDef[T], value: T) -> None:
        """Stage an event for the session's Stream (Steps only)."""
        ...
