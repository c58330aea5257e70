"""The session schema matches the spec's persistence table, and every value type is a wire type."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports import session_schema
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
    StreamDef,
)
from tests.support.wire_strategies import strategy_for

# The spec's persistence table (plus SessionSettings and TurnSessionSettings from
# "Session settings"): name -> (constant, kind, value type name).
SPEC_TABLE: dict[str, tuple[str, type[Any], str]] = {
    "AgentState": ("AGENT_STATE", AttributeDef, "AgentState"),
    "AgentMessages": ("AGENT_MESSAGES", AttributeMapDef, "AgentMessage"),
    "AgentMessageChunks": ("AGENT_MESSAGE_CHUNKS", AttributeMapDef, "AgentMessageChunk"),
    "AgentMessageIndex": ("AGENT_MESSAGE_INDEX", AttributeDef, "AgentMessageIndex"),
    "TurnReplySequence": ("TURN_REPLY_SEQUENCE", AttributeDef, "TurnReplySequence"),
    "FrameworkRunState": ("FRAMEWORK_RUN_STATE", AttributeDef, "str"),
    "AgentToolCalls": ("AGENT_TOOL_CALLS", AttributeMapDef, "AgentToolCall"),
    "PendingInterrupts": ("PENDING_INTERRUPTS", AttributeDef, "tuple"),
    "AgentUsage": ("AGENT_USAGE", AttributeDef, "AgentUsage"),
    "QueuedUserMessages": ("QUEUED_USER_MESSAGES", ChannelDef, "AgentUserMessage"),
    "InterruptResolutions": ("INTERRUPT_RESOLUTIONS", ChannelMapDef, "AgentInterruptResolution"),
    "ToolCallResults": ("TOOL_CALL_RESULTS", ChannelDef, "ToolCallCompleted"),
    "SteeredUserMessages": ("STEERED_USER_MESSAGES", ChannelDef, "AgentUserMessage"),
    "TurnControlRequests": ("TURN_CONTROL_REQUESTS", ChannelDef, "TurnControlRequest"),
    "TurnCancellationRequest": (
        "TURN_CANCELLATION_REQUEST",
        AttributeDef,
        "TurnCancellationRequest",
    ),
    "ToolCallCancellations": ("TOOL_CALL_CANCELLATIONS", ChannelMapDef, "ToolCallCancellation"),
    "AgentTraceContext": ("AGENT_TRACE_CONTEXT", AttributeDef, "str"),
    "AgentPlan": ("AGENT_PLAN", AttributeDef, "AgentPlan"),
    "PlanExecutions": ("PLAN_EXECUTIONS", ChannelMapDef, "PlanExecutionRequest"),
    "PendingPlanExecution": ("PENDING_PLAN_EXECUTION", AttributeDef, "PlanExecutionRequest"),
    "ContextSummary": ("CONTEXT_SUMMARY", AttributeDef, "ContextSummary"),
    "SessionSettings": ("SESSION_SETTINGS", AttributeDef, "Mapping"),
    "TurnSessionSettings": ("TURN_SESSION_SETTINGS", AttributeDef, "TurnSessionSettings"),
}


def _type_name(value_type: Any) -> str:
    return str(getattr(value_type, "__name__", None) or getattr(value_type, "_name", value_type))


@pytest.mark.parametrize("name", sorted(SPEC_TABLE))
def test_each_spec_name_has_its_kind_and_value_type(name: str) -> None:
    constant, kind, value_type_name = SPEC_TABLE[name]
    definition = getattr(session_schema, constant)
    assert definition.name == name
    assert type(definition) is kind
    assert _type_name(definition.value_type) == value_type_name


def test_the_schema_lists_every_name_once() -> None:
    names = [definition.name for definition in session_schema.SESSION_SCHEMA]
    assert sorted(names) == sorted(SPEC_TABLE)


def test_the_event_stream_defaults_to_ten_mebibytes() -> None:
    stream = session_schema.agent_events_stream()
    assert stream.name == "AgentEvents"
    assert stream.capacity_bytes == 10 * 1024 * 1024
    with pytest.raises(ValueError, match="capacity_bytes must be positive"):
        StreamDef("AgentEvents", str, 0)


@pytest.mark.parametrize("name", ["", "a/b"])
def test_names_must_be_non_empty_without_a_slash(name: str) -> None:
    with pytest.raises(ValueError, match="must be non-empty and contain no '/'"):
        AttributeDef(name, str)


@pytest.mark.parametrize(
    "definition", session_schema.SESSION_SCHEMA, ids=lambda definition: definition.name
)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_every_declared_value_round_trips(definition: Any, data: st.DataObject) -> None:
    value = data.draw(strategy_for(definition.value_type))
    assert from_json(to_json(value), definition.value_type) == value
