"""The browser snapshot: the wire snapshot without the Steps' own fields, everything else kept."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from hypothesis import given, settings

from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.wire import to_wire
from dex_agents.ui_stream import (
    BROWSER_HIDDEN_MESSAGE_FIELDS,
    BROWSER_HIDDEN_TOOL_CALL_FIELDS,
    AgentEventStreamSnapshot,
    browser_snapshot_wire,
)
from tests.support.wire_strategies import value_strategy

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

MESSAGE = AgentMessage(
    sequence=1,
    turn_id="turn-1",
    role=MessageRole.ASSISTANT,
    framework_item='{"instructions": "secret"}',
    text="hi",
    created_at=T0,
)
TOOL_CALL = AgentToolCall(
    tool_call_id="call-1",
    tool_name="lookup",
    arguments='{"id": 7}',
    turn_id="turn-1",
    effect=ToolEffect.READ,
    requires_approval=False,
    status=ToolCallStatus.WAITING_FOR_TASK,
    deferral_order=0,
    input_continuation="continuation",
    input_answers=("yes",),
    task_id="task-1",
    task_answer_pending=True,
    tool_source_reference="mcp:orders",
    trace_context="00-trace-01",
    runner_tool_state="state",
)
SNAPSHOT = AgentSnapshot(
    state=AgentState(status=AgentStatus.RUNNING_TOOLS, active_turn_id="turn-1"),
    messages=(MESSAGE,),
    tool_calls=(TOOL_CALL,),
    session_settings={"model": "small", "nested": {"keep": [1, 2]}},
)


@pytest.mark.parametrize(
    ("value", "hidden"),
    [
        (AgentMessage, BROWSER_HIDDEN_MESSAGE_FIELDS),
        (AgentToolCall, BROWSER_HIDDEN_TOOL_CALL_FIELDS),
    ],
)
def test_every_hidden_field_is_a_field_of_its_value_type(
    value: type[Any], hidden: tuple[str, ...]
) -> None:
    names = {field.name for field in attrs.fields(value)}
    assert set(hidden) <= names


@pytest.mark.parametrize("field", BROWSER_HIDDEN_MESSAGE_FIELDS)
def test_a_message_loses_its_framework_item(field: str) -> None:
    (message,) = browser_snapshot_wire(SNAPSHOT)["messages"]
    assert field not in message
    assert message == {k: v for k, v in to_wire(MESSAGE).items() if k != field}


@pytest.mark.parametrize("field", BROWSER_HIDDEN_TOOL_CALL_FIELDS)
def test_a_tool_call_loses_each_steps_only_field(field: str) -> None:
    (call,) = browser_snapshot_wire(SNAPSHOT)["tool_calls"]
    assert field not in call
    assert call["task_id"] == "task-1"
    assert call["status"] == "waiting_for_task"


def test_the_rest_of_the_snapshot_is_its_wire_form_with_settings_as_stored() -> None:
    browser = browser_snapshot_wire(SNAPSHOT)
    wire = to_wire(SNAPSHOT)
    for key in ("messages", "tool_calls"):
        browser.pop(key)
        wire.pop(key)
    assert browser == wire
    assert browser["session_settings"] == {"model": "small", "nested": {"keep": [1, 2]}}


def test_to_json_is_a_fresh_json_compatible_dict() -> None:
    value = AgentEventStreamSnapshot.of(SNAPSHOT, "tok")
    body = value.to_json()
    assert sorted(body) == ["resume_token", "snapshot"]
    assert body["resume_token"] == "tok"
    assert json.loads(json.dumps(body)) == body
    body["snapshot"]["session_settings"]["nested"]["keep"].append(3)
    assert value.to_json()["snapshot"]["session_settings"]["nested"]["keep"] == [1, 2]


def test_to_json_writes_a_lone_surrogate_as_the_replacement_character() -> None:
    # A web framework's JSONResponse encodes text as UTF-8 and fails on a surrogate.
    name = "report-\udcff.txt"
    message = attrs.evolve(MESSAGE, text=f"found {name}")
    snapshot = attrs.evolve(
        SNAPSHOT, messages=(message,), session_settings={f"k{name}": [name, 1, None]}
    )
    value = AgentEventStreamSnapshot.of(snapshot, "tok")
    body = value.to_json()
    json.dumps(body, ensure_ascii=False).encode("utf-8")
    assert body["snapshot"]["messages"][0]["text"] == "found report-\ufffd.txt"
    assert body["snapshot"]["session_settings"] == {
        "kreport-\ufffd.txt": ["report-\ufffd.txt", 1, None]
    }
    assert value.snapshot["messages"][0]["text"] == f"found {name}"


@settings(max_examples=30, deadline=None)
@given(value_strategy(AgentSnapshot))
def test_any_snapshot_loses_exactly_the_hidden_fields(snapshot: AgentSnapshot) -> None:
    browser = browser_snapshot_wire(snapshot)
    wire = to_wire(snapshot)
    for name, hidden in (
        ("messages", BROWSER_HIDDEN_MESSAGE_FIELDS),
        ("tool_calls", BROWSER_HIDDEN_TOOL_CALL_FIELDS),
    ):
        assert browser[name] == [
            {key: value for key, value in item.items() if key not in hidden} for item in wire[name]
        ]
        assert all(not set(hidden) & set(item) for item in browser[name])
