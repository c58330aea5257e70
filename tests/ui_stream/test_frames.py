"""The SSE frame format: one ``id`` line, one ``data`` line of wire JSON with ``payload`` as JSON text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings

from dex_agents.domain.events import AgentEvent, TextDeltaPayload, TurnStartedPayload
from dex_agents.domain.wire import to_wire
from dex_agents.ui_stream import (
    AGENT_EVENT_STREAM_HEADERS,
    KEEP_ALIVE_FRAME,
    agent_event_data,
    agent_event_frame,
)
from tests.support.wire_strategies import value_strategy
from tests.ui_stream.sse import parse_frame


def event(event_type: str, payload: Any, turn_id: str | None = "turn-1") -> AgentEvent:
    return AgentEvent(
        type=event_type, payload=payload, turn_id=turn_id, step_execution_id="RunModel-1", attempt=2
    )


FRAMES = [
    (
        event("turn_started", TurnStartedPayload(sequence=3)),
        "tok-1",
        'id: tok-1\ndata: {"attempt":2,"payload":"{\\"sequence\\":3}",'
        '"step_execution_id":"RunModel-1","turn_id":"turn-1","type":"turn_started"}\n\n',
    ),
    (
        # Line breaks in text are escaped twice (payload JSON inside event JSON): one data line.
        event("text_delta", TextDeltaPayload(text='a\nb\r"é\u2028')),
        "tok-2",
        'id: tok-2\ndata: {"attempt":2,"payload":"{\\"text\\":\\"a\\\\nb\\\\r\\\\\\"é\u2028\\"}",'
        '"step_execution_id":"RunModel-1","turn_id":"turn-1","type":"text_delta"}\n\n',
    ),
    (
        # A runner's own event type carries a plain object; a session-level event no turn.
        event("example.progress", {"b": 1, "a": [True, None]}, turn_id=None),
        "WyJzLTEiLDRd",
        'id: WyJzLTEiLDRd\ndata: {"attempt":2,"payload":"{\\"a\\":[true,null],\\"b\\":1}",'
        '"step_execution_id":"RunModel-1","turn_id":null,"type":"example.progress"}\n\n',
    ),
]


@pytest.mark.parametrize(("value", "token", "expected"), FRAMES)
def test_a_frame_is_exactly_its_id_and_data(value: AgentEvent, token: str, expected: str) -> None:
    assert agent_event_frame(value, token) == expected


@pytest.mark.parametrize("token", ["", "a\nb", "a\rb", "a\0b"])
def test_a_token_sse_cannot_carry_as_an_id_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match="SSE id"):
        agent_event_frame(FRAMES[0][0], token)


def test_the_keep_alive_frame_is_an_sse_comment() -> None:
    assert KEEP_ALIVE_FRAME == ": keep-alive\n\n"
    assert parse_frame(KEEP_ALIVE_FRAME.removesuffix("\n\n")).comment == "keep-alive"


def test_the_headers_are_an_event_stream_without_hop_by_hop_fields() -> None:
    assert dict(AGENT_EVENT_STREAM_HEADERS) == {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache, no-transform",
        "X-Accel-Buffering": "no",
    }
    with pytest.raises(TypeError):
        AGENT_EVENT_STREAM_HEADERS["Connection"] = "keep-alive"  # type: ignore[index]


@settings(max_examples=100, deadline=None)
@given(value_strategy(AgentEvent))
def test_every_event_is_one_frame_whose_data_decodes_to_its_wire_form(value: AgentEvent) -> None:
    frame = agent_event_frame(value, "tok")
    body = frame.removesuffix("\n\n")
    assert frame.endswith("\n\n")
    assert "\n\n" not in body
    assert "\r" not in body
    lines = body.split("\n")
    assert lines[0] == "id: tok"
    assert len(lines) == 2
    assert lines[1].startswith("data: ")
    data = json.loads(lines[1].removeprefix("data: "))
    assert data == json.loads(agent_event_data(value))
    wire = to_wire(value)
    assert json.loads(data.pop("payload")) == json.loads(json.dumps(wire.pop("payload")))
    assert data == wire
