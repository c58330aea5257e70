"""Helpers of the question, wait and task tests: a session Flow with a test RPC that
publishes a ``ToolCallCancellation``, as ``ResumeTurn`` does for a steer, and event helpers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from dex_agents import AgentSessionFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.events import (
    AgentEvent,
)
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import (
    AgentToolCall,
    CancellationReason,
    ToolCallCancellation,
    ToolCallStatus,
)
from dex_agents.ports.engine import Rpc, RpcResult
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.session_schema import TOOL_CALL_CANCELLATIONS
from dex_agents.ports.step_contexts import RpcContext
from tests.app.harness import Session, session_stack
from tests.app.scripted_runner import ScriptedRunner

CANCEL_TOOL_CALL_RPC = "test_cancel_tool_call"

BUILT_INS = frozenset({BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT})


def _publish_cancellation(
    context: RpcContext, cancellation: ToolCallCancellation
) -> RpcResult[bool]:
    context.state.publish_to(TOOL_CALL_CANCELLATIONS, cancellation.tool_call_id, cancellation)
    return RpcResult(True)


class CancellableSessionFlow(AgentSessionFlow):
    """The session Flow plus one test RPC that wakes a call as a steer or ``cancel_turn`` does."""

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        cancel = Rpc(
            CANCEL_TOOL_CALL_RPC,
            ToolCallCancellation,
            bool,
            _publish_cancellation,
            is_transactional=True,
        )
        return {**super().rpcs, CANCEL_TOOL_CALL_RPC: cancel}


def stack(
    store: FlowStore, runner: ScriptedRunner, options: AgentSessionOptions | None = None
) -> contextlib.AbstractAsyncContextManager[Session]:
    """``session_stack`` with the test cancellation RPC."""
    return session_stack(store, runner, options, flow_class=CancellableSessionFlow)


async def cancel_tool_call(session: Session, tool_call_id: str, reason: CancellationReason) -> None:
    """Publish a ``ToolCallCancellation`` for a call, as ``ResumeTurn`` does for a steer."""
    cancellation = ToolCallCancellation(tool_call_id=tool_call_id, reason=reason)
    assert await session.client.invoke_rpc(session.flow, "s1", CANCEL_TOOL_CALL_RPC, cancellation)


def record_with(
    status: ToolCallStatus, tool_call_id: str = "call-1"
) -> Callable[[AgentSnapshot], AgentToolCall | None]:
    """A snapshot probe: the call's record once it has ``status``."""

    def probe(snapshot: AgentSnapshot) -> AgentToolCall | None:
        return next(
            (
                record
                for record in snapshot.tool_calls
                if record.tool_call_id == tool_call_id and record.status is status
            ),
            None,
        )

    return probe


def payloads(events: list[AgentEvent], event_type: str) -> list[Any]:
    return [event.payload for event in events if event.type == event_type]


async def step_types(session: Session) -> list[str]:
    return [entry.step_type for entry in await session.client.read_step_history("s1")]
