"""Whole sessions of an agent with one ``McpToolSource`` on the embedded engine."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from dex_agents import AgentSessionClient, AgentSnapshot
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
)
from dex_agents.composition.session_flow import AgentSessionFlow
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.mcp_conventions import IDEMPOTENCY_KEY_META_KEY
from dex_agents.local import LocalRuntime
from dex_agents.mcp import McpToolSource
from dex_agents.ports.model_client import ModelClient
from tests.adapters.mcp.conftest import CallLog
from tests.support.session_events import session_events

SESSION = "s1"


def calls_then_answer(*calls: tuple[str, dict[str, Any] | str]) -> ScriptedModelClient:
    """A model that calls each tool in turn, then answers with every result joined."""

    def respond(request: ModelRequest) -> ScriptedModelReply:
        done = ScriptedModelClient.tool_results(request)
        if len(done) < len(calls):
            name, arguments = calls[len(done)]
            return ScriptedModelReply(
                tool_calls=(ScriptedToolCall(name, arguments, call_id=f"c{len(done) + 1}"),)
            )
        return ScriptedModelReply(text=" | ".join(result.output for result in done))

    return ScriptedModelClient(respond)


@asynccontextmanager
async def running(
    source: McpToolSource, model: ModelClient, *, media_store: Any = None
) -> AsyncIterator[tuple[LocalRuntime, AgentSessionFlow]]:
    """An in-memory runtime serving an agent on ``model`` with ``source``'s tools, and its Flow."""
    agent = AgentDefinition(
        name="notes", instructions="You manage notes.", model=model, tool_sources=[source]
    )
    flow = builtin_agent_session_flow(agent, flow_type="McpAgent", media_store=media_store)
    try:
        async with LocalRuntime(None, [flow]) as runtime:
            yield runtime, flow
    finally:
        await source.aclose()


@asynccontextmanager
async def session(
    source: McpToolSource, model: ModelClient, *, media_store: Any = None
) -> AsyncIterator[AgentSessionClient]:
    """The open session ``SESSION`` of an agent on ``model`` with ``source``'s tools."""
    async with running(source, model, media_store=media_store) as (runtime, flow):
        sessions = runtime.sessions(flow)
        await sessions.open_session(SESSION)
        yield sessions


async def events(runtime: LocalRuntime, flow: AgentSessionFlow) -> list[AgentEvent]:
    """Every event of ``SESSION``'s Stream so far."""
    return await session_events(runtime.flow_client, flow, SESSION)


async def turn(sessions: AgentSessionClient, text: str = "go") -> AgentSnapshot:
    """Send ``text`` and wait until the session waits for the user again."""
    assert await sessions.send_user_message(SESSION, text)
    return await sessions.wait_for_user(SESSION)


async def approve(sessions: AgentSessionClient, snapshot: AgentSnapshot) -> AgentSnapshot:
    """Approve the one pending approval of ``snapshot`` and wait for the user."""
    (approval,) = snapshot.pending_interrupts
    assert await sessions.resolve_interrupt(SESSION, approval.interrupt_id, True)
    return await sessions.wait_for_user(SESSION)


def outputs(snapshot: AgentSnapshot) -> list[str]:
    """The tool outputs of the session, in order."""
    return [m.tool_output for m in snapshot.messages if m.tool_output is not None]


def keys(call_log: CallLog, tool: str) -> Sequence[str]:
    """The idempotency key in ``_meta`` of each call of ``tool`` the server received."""
    return [row["meta"][IDEMPOTENCY_KEY_META_KEY] for row in call_log.calls(tool)]
