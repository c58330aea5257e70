"""``ToyAgent``: a port Flow definition that is also a registrable ``dex.Flow``.

The ``DexFlowClient`` tests start, call and read it; none of its Steps or RPC
handlers runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dex

from dex_agents.adapters.dex.schema import DexSchema, build_dex_schema
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.state import AgentSessionStartInput
from dex_agents.ports.engine import Rpc, RpcResult, Step, StepDecision
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
    StreamDef,
)
from dex_agents.ports.step_contexts import RpcContext, StepContext

FLOW_TYPE = "ToyAgent"
STATUS = AttributeDef[str]("status", str)
LAST_MESSAGE = AttributeDef[AgentUserMessage]("last_message", AgentUserMessage)
EVENTS = StreamDef[AgentUserMessage]("events", AgentUserMessage, 4096)


class StartToy(Step[AgentSessionStartInput]):
    input_type = AgentSessionStartInput

    async def execute(self, context: StepContext, input: AgentSessionStartInput) -> StepDecision:
        raise AssertionError("no Step runs in these tests")


def _no_handler(context: RpcContext, value: Any) -> RpcResult[Any]:
    raise AssertionError("no RPC handler runs in these tests")


class ToyFlow(dex.Flow[None]):
    """A port Flow definition that is also a registrable ``dex.Flow`` bound to its Dex schema."""

    def __init__(self, *, with_stream: bool = True) -> None:
        self._stream = EVENTS if with_stream else None
        self._schema = build_dex_schema((STATUS, LAST_MESSAGE), self._stream)
        self._start = StartToy()
        self._rpcs: dict[str, Rpc[Any, Any]] = {
            "echo": Rpc("echo", AgentUserMessage, AgentUserMessage, _no_handler),
            "count": Rpc("count", type(None), int, _no_handler),
            "forget": Rpc("forget", str, type(None), _no_handler),
        }

    def get_flow_type(self) -> str:
        return FLOW_TYPE

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        return self._schema.persistence_schema()

    @property
    def flow_type(self) -> str:
        return FLOW_TYPE

    @property
    def start_step(self) -> Step[Any] | None:
        return self._start

    @property
    def steps(self) -> Sequence[Step[Any]]:
        return (self._start,)

    @property
    def schema(
        self,
    ) -> Sequence[AttributeDef[Any] | AttributeMapDef[Any] | ChannelDef[Any] | ChannelMapDef[Any]]:
        return (STATUS, LAST_MESSAGE)

    @property
    def stream(self) -> StreamDef[Any] | None:
        return self._stream

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        return self._rpcs

    @property
    def dex_schema(self) -> DexSchema:
        return self._schema

    def dex_rpc_method(self, name: str) -> Callable[..., Any]:
        methods: dict[str, Callable[..., Any]] = {
            "echo": self.echo,
            "count": self.count,
            "forget": self.forget,
        }
        return methods[name]

    @dex.rpc
    def echo(self, context: dex.Context, input: str) -> dex.RPCResult[str]:
        raise AssertionError("no RPC handler runs in these tests")

    @dex.rpc
    def count(self, context: dex.Context) -> dex.RPCResult[int]:
        raise AssertionError("no RPC handler runs in these tests")

    @dex.rpc
    def forget(self, context: dex.Context, input: str) -> None:
        raise AssertionError("no RPC handler runs in these tests")
