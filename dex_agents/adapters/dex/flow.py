"""``DexFlow``: a port Flow definition that is also a ``dex.Flow``.

Mix it into a class that implements the port's ``FlowDefinition`` and the
instance can be passed both to the embedded engine and to
``dex.Registry([flow], allow_async_handlers=True)``. The Dex binding (schema,
Step classes, RPC methods) is built once, on first use; the RPC methods are then
bound to the instance under the RPC names, as Dex finds them with ``dir``, and
``AsyncClient.invoke_rpc`` takes ``flow.send_user_message`` and the like.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import dex

from dex_agents.adapters.dex.binding import DexBinding
from dex_agents.adapters.dex.schema import DexSchema
from dex_agents.ports.engine import FlowDefinition


class DexFlow(dex.Flow[Any]):
    """Dex's view of a port ``FlowDefinition`` subclass: its type, Steps, schema and RPCs."""

    _dex_binding: DexBinding | None = None

    def _port_definition(self) -> FlowDefinition:
        # DexFlow is mixed into classes that implement FlowDefinition.
        return cast(FlowDefinition, self)

    @property
    def dex_binding(self) -> DexBinding:
        """The Dex form of this Flow, built on first use; its RPC methods are then bound."""
        if self._dex_binding is None:
            binding = DexBinding(self._port_definition())
            for name, method in binding.rpc_methods(self).items():
                if hasattr(type(self), name):
                    raise ValueError(f"RPC {name} would hide the Flow's own attribute {name}")
                setattr(self, name, method)
            self._dex_binding = binding
        return self._dex_binding

    @property
    def dex_schema(self) -> DexSchema:
        """The Dex definitions of this Flow's Attributes, Channels and Stream."""
        return self.dex_binding.schema

    def dex_rpc_method(self, name: str) -> Callable[..., Any]:
        """The bound ``@rpc`` method Dex registered for the RPC ``name``."""
        binding = self.dex_binding
        if name not in binding.definition.rpcs:
            raise LookupError(f"Flow {self.get_flow_type()} has no RPC {name}")
        method: Callable[..., Any] = getattr(self, name)
        return method

    def get_flow_type(self) -> str:
        """The port Flow type."""
        return self._port_definition().flow_type

    def get_steps(self) -> dex.StepList[Any]:
        """One Dex Step per port Step, the start Step first."""
        return self.dex_binding.step_list()

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        """Every Attribute, AttributeMap, Channel and ChannelMap, and the event Stream."""
        return self.dex_schema.persistence_schema()
