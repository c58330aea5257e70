"""Browser streams: a session's snapshot JSON and its ``AgentEvents`` as Server-Sent Events.

A web app mounts two routes per session: the snapshot
(``read_agent_event_stream_snapshot(client, flow, session_id).to_json()``) and
the events (``await stream_agent_event_frames(client, flow, session_id,
resume_token=...)`` served with ``AGENT_EVENT_STREAM_HEADERS``). A token the
engine refuses raises ``InvalidAgentEventResumeTokenError`` before the response
starts; answer 400. The ``_sync`` variants take a synchronous client for WSGI
servers: a Dex ``dex.Client``, or on the embedded engine the runtime's
``LocalRuntime.sync_flow_client()``.
Authorize every route: the session ID and
the token come from the browser.
"""

from __future__ import annotations

from dex_agents.app.ui_stream.errors import InvalidAgentEventResumeTokenError
from dex_agents.app.ui_stream.frames import DEFAULT_AGENT_EVENT_POLL_TIMEOUT
from dex_agents.composition.ui_stream import (
    read_agent_event_stream_snapshot,
    read_agent_event_stream_snapshot_sync,
    stream_agent_event_frames,
    stream_agent_event_frames_sync,
)
from dex_agents.domain.ui_stream_frames import (
    AGENT_EVENT_STREAM_HEADERS,
    KEEP_ALIVE_FRAME,
    agent_event_data,
    agent_event_frame,
)
from dex_agents.domain.ui_stream_snapshot import (
    BROWSER_HIDDEN_MESSAGE_FIELDS,
    BROWSER_HIDDEN_TOOL_CALL_FIELDS,
    AgentEventStreamSnapshot,
    browser_snapshot_wire,
)
from dex_agents.ports.sync_flow_client import SyncFlowClient

__all__ = [
    "AGENT_EVENT_STREAM_HEADERS",
    "BROWSER_HIDDEN_MESSAGE_FIELDS",
    "BROWSER_HIDDEN_TOOL_CALL_FIELDS",
    "DEFAULT_AGENT_EVENT_POLL_TIMEOUT",
    "KEEP_ALIVE_FRAME",
    "AgentEventStreamSnapshot",
    "InvalidAgentEventResumeTokenError",
    "SyncFlowClient",
    "agent_event_data",
    "agent_event_frame",
    "browser_snapshot_wire",
    "read_agent_event_stream_snapshot",
    "read_agent_event_stream_snapshot_sync",
    "stream_agent_event_frames",
    "stream_agent_event_frames_sync",
]
