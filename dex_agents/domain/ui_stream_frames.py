"""Server-Sent Event frames of the ``AgentEvents`` Stream, for a browser's ``EventSource``.

Each event is one frame: its ``id`` is the event's resume token, so a
reconnecting ``EventSource`` sends it back as ``Last-Event-ID``, and its
``data`` is the ``AgentEvent`` wire JSON with ``payload`` as JSON text (the form
the TypeScript core's ``ui-stream`` writes). A frame has no ``event`` field, so
the browser's ``onmessage`` receives every event. ``KEEP_ALIVE_FRAME`` is an SSE
comment, which ``EventSource`` ignores, sent after each empty long poll to keep
proxies from closing an idle response.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from dex_agents.domain.canonical_json import dumps
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.wire import to_wire

KEEP_ALIVE_FRAME = ": keep-alive\n\n"
"""The SSE comment sent after each long poll that saw no event."""

AGENT_EVENT_STREAM_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "Content-Type": "text/event-stream; charset=utf-8",
        # no-transform: a compressing proxy would buffer the stream.
        "Cache-Control": "no-cache, no-transform",
        # nginx buffers proxied responses unless told not to.
        "X-Accel-Buffering": "no",
    }
)
"""The headers of an event stream response; pass ``dict(AGENT_EVENT_STREAM_HEADERS)``.

No hop-by-hop header (``Connection``): WSGI servers refuse them from an application.
"""

_LINE_BREAKS = ("\r", "\n", "\0")


def agent_event_data(event: AgentEvent) -> str:
    """The ``data`` of an event's frame: its wire JSON with ``payload`` as canonical JSON text."""
    wire: dict[str, Any] = to_wire(event)
    wire["payload"] = dumps(wire["payload"])
    return dumps(wire)


def agent_event_frame(event: AgentEvent, resume_token: str) -> str:
    """One SSE frame: ``id: <resume_token>``, ``data: <agent_event_data>``, and a blank line.

    Raises ``ValueError`` for an empty token or one with a line break or NUL,
    which SSE cannot carry in an ``id`` (neither engine issues one).
    """
    if not resume_token or any(mark in resume_token for mark in _LINE_BREAKS):
        raise ValueError(f"an SSE id needs a non-empty token without line breaks: {resume_token!r}")
    # Canonical JSON escapes every control character, so the data is one line.
    return f"id: {resume_token}\ndata: {agent_event_data(event)}\n\n"
