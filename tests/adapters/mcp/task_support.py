"""Helpers of the MCP task tests: the session's events and its tool call records."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dex_agents import AgentSessionClient
from dex_agents.domain.events import AgentEvent, EventPayload
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.testing import wait_for_agent_snapshot
from tests.adapters.mcp.session_support import SESSION
from tests.support.session_events import session_events


async def events(sessions: AgentSessionClient) -> list[AgentEvent]:
    """Every event of the session's Stream so far."""
    return await session_events(sessions.flow_client, sessions.flow, SESSION)


def payloads(found: list[AgentEvent], event_type: str) -> list[Any]:
    """The payloads of the events of one type, in order."""
    return [event.payload for event in found if event.type == event_type]


def with_status(status: ToolCallStatus) -> Callable[[AgentSnapshot], AgentToolCall | None]:
    """A snapshot probe: the first tool call record with ``status``."""

    def probe(snapshot: AgentSnapshot) -> AgentToolCall | None:
        return next((r for r in snapshot.tool_calls if r.status is status), None)

    return probe


async def waiting_for_task(sessions: AgentSessionClient) -> AgentToolCall:
    """The session's call once it waits for its task."""
    return await wait_for_agent_snapshot(
        sessions,
        SESSION,
        with_status(ToolCallStatus.WAITING_FOR_TASK),
        description="a call waiting for its task",
    )


class NoEvents:
    """An ``AgentEventWriter`` that drops every event, for a source called outside a session."""

    def write_text_delta(self, text: str) -> None:
        """Drop it."""

    def write_reasoning_delta(self, text: str) -> None:
        """Drop it."""

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        """Drop it."""

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: ToolCallStatus
    ) -> None:
        """Drop it."""

    def write_event(self, event_type: str, payload: Mapping[str, Any] | EventPayload) -> None:
        """Drop it."""
