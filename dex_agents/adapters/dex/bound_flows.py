"""What ``DexFlowClient`` and ``DexSyncFlowClient`` share: the Flow bound to Dex, its RPC calls,
and what a "closed or not found" refusal turns out to be.

The two clients make the same calls, one awaiting ``dex.AsyncClient`` and one
blocking on ``dex.Client``; what they decide before and after a call is here once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import attrs
import dex

from dex_agents.adapters.dex.errors import port_error
from dex_agents.adapters.dex.flow_statuses import port_flow_status
from dex_agents.adapters.dex.schema import DexSchema
from dex_agents.adapters.dex.wire_values import from_dex, to_dex
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import FlowDefinitionError, FlowNotFoundError
from dex_agents.ports.flow_rows import FlowStatus


@runtime_checkable
class DexBoundFlow(FlowDefinition, Protocol):
    """A session Flow bound to Dex: the port's Flow definition plus its Dex definitions.

    ``start_flow`` also needs it to be the ``dex.Flow`` instance registered in the
    client's ``dex.Registry``.
    """

    @property
    def dex_schema(self) -> DexSchema:
        """The Dex Attributes, Channels and Stream of the Flow."""

    def dex_rpc_method(self, name: str) -> Callable[..., Any]:
        """The bound ``@rpc`` method registered with Dex for the port RPC ``name``."""


def dex_bound_flow(flow: FlowDefinition) -> DexBoundFlow:
    """``flow`` as a ``DexBoundFlow``; ``TypeError`` for a Flow not bound to Dex."""
    if not isinstance(flow, DexBoundFlow):
        raise TypeError(
            f"Flow type {flow.flow_type} is not bound to Dex: it has no dex_schema "
            "and dex_rpc_method; serve the Dex adapter's session Flow"
        )
    return flow


@attrs.frozen
class DexRpcCall:
    """One port RPC as a Dex client calls it.

    ``method`` is the Dex ``@rpc`` method; ``wire_input`` is the input in its
    wire form, sent only when ``takes_input``.
    """

    method: Callable[..., Any]
    takes_input: bool
    wire_input: Any
    output_type: Any

    def decode(self, output: Any) -> Any:
        """The RPC's output decoded as its wire type; ``None`` for an RPC with no output."""
        if self.output_type is type(None):
            return None
        return from_dex(self.output_type, output)


def dex_rpc_call(flow: FlowDefinition, rpc: str, input: Any) -> DexRpcCall:
    """The Dex call of the port RPC ``rpc`` with ``input``, checked before anything is sent.

    ``TypeError`` for a Flow not bound to Dex, ``FlowDefinitionError`` for an RPC
    the Flow does not have, ``ValueError`` for input to an RPC that takes none.
    """
    bound = dex_bound_flow(flow)
    try:
        definition = flow.rpcs[rpc]
    except KeyError:
        raise FlowDefinitionError(f"Flow type {flow.flow_type} has no RPC {rpc}") from None
    method = bound.dex_rpc_method(rpc)
    takes_input = definition.input_type is not type(None)
    if not takes_input and input is not None:
        raise ValueError(f"RPC {rpc} takes no input, got {type(input).__name__}")
    wire_input = to_dex(definition.input_type, input) if takes_input else None
    return DexRpcCall(method, takes_input, wire_input, definition.output_type)


def closed_or_missing(
    flow_id: str,
    error: dex.FlowNotActiveOrNotFoundError,
    flow_type: str | None,
    info: dex.FlowInfo | None,
) -> Exception | str:
    """What Dex refused as "closed or not found" is, told apart as the embedded engine does.

    ``info`` is what ``describe_flow`` said of ``flow_id`` afterwards (``None``
    when it found none). The error to raise for a missing session (or one of
    another ``flow_type``), else the closed session's status; Dex's own error,
    translated, when the session is running after all.
    """
    if info is None or (flow_type is not None and info.flow_type != flow_type):
        session = "session" if flow_type is None else f"{flow_type} session"
        return FlowNotFoundError(f"no {session} with ID {flow_id!r}")
    status = port_flow_status(info.status)
    return port_error(error) if status == FlowStatus.RUNNING.value else status
