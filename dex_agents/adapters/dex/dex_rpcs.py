"""A port RPC as a Dex ``@rpc`` handler: its locks, loads, input and output declared to Dex.

Dex finds RPCs as methods of the registered Flow carrying ``@rpc`` options, reads
their input and output types from annotations, and runs a synchronous handler
with a ``Context``. The port handler is synchronous too, so the Dex handler is a
plain function that translates the Context in and the ``RpcResult`` out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

import dex

from dex_agents.adapters.dex.contexts import DexHandlerView
from dex_agents.adapters.dex.schema import DexSchema, map_loads
from dex_agents.adapters.dex.state import DexState
from dex_agents.adapters.dex.wire_values import dex_type, from_dex, to_dex
from dex_agents.ports.engine import Rpc, Step, StepMovement


class RpcBinding(Protocol):
    """What an RPC handler needs of its Flow's binding."""

    @property
    def schema(self) -> DexSchema:
        """The Flow's Dex definitions."""
        ...

    @property
    def clock(self) -> Callable[[], datetime]:
        """The handlers' clock (UTC)."""
        ...

    def movements(self, movements: Sequence[StepMovement]) -> tuple[dex.StepMovement[Any], ...]:
        """Port movements as Dex movements."""
        ...

    def cancellations(self, steps: Sequence[type[Step[Any]]]) -> tuple[type[dex.Step[Any]], ...]:
        """Port Step classes as Dex Step classes."""
        ...


class DexRpcContext(DexHandlerView):
    """What a port RPC handler sees inside a Dex RPC."""

    @property
    def flow_active(self) -> bool:
        """Always true: Dex runs an RPC that writes only on an active Flow, and refuses it otherwise."""
        return True


def make_rpc_handler(rpc: Rpc[Any, Any], binding: RpcBinding) -> Callable[..., Any]:
    """A function to bind to the Flow instance as its Dex RPC method named ``rpc.name``."""
    schema = binding.schema
    whole, instances = map_loads(schema, rpc.loads)
    has_input = rpc.input_type is not type(None)

    def run(context: dex.Context, raw_input: Any) -> dex.RPCResult[Any]:
        value = from_dex(rpc.input_type, raw_input)
        state = DexState(context, schema, rpc.loads)
        result = rpc.handler(DexRpcContext(context, state, binding.clock()), value)
        return dex.RPCResult(
            to_dex(rpc.output_type, result.output),
            next_steps=binding.movements(result.next_steps),
            canceling_steps=binding.cancellations(result.canceling_steps),
        )

    if has_input:

        def handler(self: object, context: dex.Context, input: Any) -> dex.RPCResult[Any]:
            return run(context, input)

        handler.__annotations__ = {
            "context": dex.Context,
            "input": dex_type(rpc.input_type),
            "return": dex.RPCResult[dex_type(rpc.output_type)],  # type: ignore[misc]
        }
    else:

        def handler(self: object, context: dex.Context) -> dex.RPCResult[Any]:  # type: ignore[misc]
            return run(context, None)

        handler.__annotations__ = {
            "context": dex.Context,
            "return": dex.RPCResult[dex_type(rpc.output_type)],  # type: ignore[misc]
        }
    handler.__name__ = rpc.name
    handler.__qualname__ = rpc.name
    handler.__doc__ = f"The Dex form of the session RPC {rpc.name}."
    return dex.rpc(
        name=rpc.name,
        lock_attributes=tuple(schema.lock(lock) for lock in rpc.locks),
        is_transactional=rpc.is_transactional,
        load_attribute_maps=whole,
        load_attribute_map_instances=instances,
        load_channels=tuple(schema.channel(channel) for channel in rpc.channel_loads),
    )(handler)
