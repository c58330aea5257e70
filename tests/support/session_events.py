"""Every event a session's Stream holds so far, read through a ``FlowClient``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dex_agents.domain.events import AgentEvent
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import StreamReadTimeoutError
from dex_agents.ports.flow_client import FlowClient

QUIET = timedelta(milliseconds=30)
"""How long a read waits for the next event before the Stream counts as read to its end."""


async def session_events(
    client: FlowClient, flow: FlowDefinition, session_id: str
) -> list[AgentEvent]:
    """The session's retained events, oldest first, until the Stream stays quiet for ``QUIET``."""
    found: list[Any] = []
    token = ""
    while True:
        try:
            message = await client.read_stream(flow, session_id, token, poll_timeout=QUIET)
        except StreamReadTimeoutError:
            return found
        found.append(message.value)
        token = message.resume_token
