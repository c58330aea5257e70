"""The browser's snapshot: ``get_agent_snapshot`` without the fields only the session's Steps use.

A browser renders a session from this JSON, so it leaves out what only the
session's Steps read: ``framework_item`` on messages (the framework's replay
data, which can hold the agent's instructions) and, on tool calls,
``tool_source_reference``, ``trace_context``, ``input_continuation``,
``input_answers``, ``task_answer_pending`` and ``runner_tool_state``. The keys
are removed, not blanked. ``session_settings`` stays as stored: keep anything a
browser must not see out of the settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.unicode_text import replace_lone_surrogates
from dex_agents.domain.wire import to_wire

BROWSER_HIDDEN_MESSAGE_FIELDS: tuple[str, ...] = ("framework_item",)
"""``AgentMessage`` fields the browser snapshot leaves out."""

BROWSER_HIDDEN_TOOL_CALL_FIELDS: tuple[str, ...] = (
    "tool_source_reference",
    "trace_context",
    "input_continuation",
    "input_answers",
    "task_answer_pending",
    "runner_tool_state",
)
"""``AgentToolCall`` fields the browser snapshot leaves out."""


def _without(item: Mapping[str, Any], hidden: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in hidden}


def browser_snapshot_wire(snapshot: AgentSnapshot) -> dict[str, Any]:
    """The wire form of ``snapshot`` (``dex_agents.domain.wire``) without the Steps' own fields."""
    wire: dict[str, Any] = to_wire(snapshot)
    wire["messages"] = [_without(m, BROWSER_HIDDEN_MESSAGE_FIELDS) for m in wire["messages"]]
    wire["tool_calls"] = [_without(c, BROWSER_HIDDEN_TOOL_CALL_FIELDS) for c in wire["tool_calls"]]
    return wire


@attrs.frozen(kw_only=True)
class AgentEventStreamSnapshot:
    """What ``read_agent_event_stream_snapshot`` returns: the browser snapshot and a resume token.

    ``snapshot`` is the wire JSON of ``get_agent_snapshot`` without the Steps'
    own fields (``browser_snapshot_wire``); read those with
    ``get_agent_snapshot`` on the server. ``resume_token`` is the token to open
    the event stream from: while a turn is active it replays that turn's events,
    otherwise it continues after the newest event; ``""`` when the Stream holds
    none (which reads from its oldest retained event).
    """

    snapshot: Mapping[str, Any]
    resume_token: str = attrs.field(validator=attrs.validators.instance_of(str))

    @classmethod
    def of(cls, snapshot: AgentSnapshot, resume_token: str) -> AgentEventStreamSnapshot:
        """The browser view of ``snapshot`` with the token to open the event stream from."""
        return cls(snapshot=browser_snapshot_wire(snapshot), resume_token=resume_token)

    def to_json(self) -> dict[str, Any]:
        """``{"snapshot": ..., "resume_token": ...}``, a fresh JSON-compatible dict to serve as is.

        Text a tool or a model gave the session may hold a lone surrogate (a
        file name that is not UTF-8), which has no UTF-8 form: Starlette's and
        FastAPI's ``JSONResponse`` fail on it, answering 500 to every read of
        the session. Here each one is U+FFFD, which is what the browser shows
        for it in an event frame's escaped text too. ``snapshot`` keeps the
        text as stored.
        """
        wire: dict[str, Any] = replace_lone_surrogates(dict(self.snapshot))
        return {"snapshot": wire, "resume_token": self.resume_token}
