"""The JSON wire form: every domain value round-trips, and bad input is refused clearly."""

from __future__ import annotations

import importlib
import json
import pkgutil
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dex_agents.domain
from dex_agents.domain.canonical_json import dumps
from dex_agents.domain.errors import WireFormatError
from dex_agents.domain.events import AgentEvent, AgentEventType, TurnStartedPayload
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.message_index import AgentMessageChunk
from dex_agents.domain.messages import AgentMessage, AgentUserMessage, MessageRole
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.wire import from_json, from_wire, json_size, to_json, to_wire
from tests.support.wire_strategies import value_strategy


def _domain_value_types() -> list[type[Any]]:
    found: dict[str, type[Any]] = {}
    for module_info in pkgutil.iter_modules(dex_agents.domain.__path__):
        module = importlib.import_module(f"dex_agents.domain.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


VALUE_TYPES = _domain_value_types()


def test_the_domain_has_the_spec_value_types() -> None:
    names = {cls.__name__ for cls in VALUE_TYPES}
    assert {
        "AgentState",
        "AgentMessage",
        "FrameworkMessage",
        "AgentToolCall",
        "AgentInterrupt",
        "AgentInterruptResolution",
        "AgentPlan",
        "AgentUsage",
        "ContextSummary",
        "AgentMessageIndex",
        "AgentMessageChunk",
        "AgentUserMessage",
        "AgentSnapshot",
        "AgentMessagesPage",
        "AgentEvent",
    } <= names


@pytest.mark.parametrize("cls", VALUE_TYPES, ids=lambda cls: cls.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_value_round_trips_through_json(cls: type[Any], data: st.DataObject) -> None:
    value = data.draw(value_strategy(cls))
    text = to_json(value)
    assert from_json(text, cls) == value
    # The text is canonical: encoding the decoded value gives the same bytes.
    assert to_json(from_json(text, cls)) == text


def test_enums_travel_as_plain_strings_and_keys_are_snake_case() -> None:
    call = AgentToolCall(
        tool_call_id="call-1",
        tool_name="refund_order",
        arguments='{"order_id":"7"}',
        turn_id="turn-1",
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=ToolCallStatus.OUTCOME_UNKNOWN,
        deferral_order=0,
    )
    wire = to_wire(call)
    assert wire["effect"] == "non_idempotent_write"
    assert wire["status"] == "outcome_unknown"
    assert wire["deferral_order"] == 0
    assert type(wire["status"]) is str


def test_an_image_reference_carries_its_type() -> None:
    reference = AgentImageReference(
        uri="s3://agent-media/sessions/sha256/9f2c",
        mime_type="image/png",
        sha256="9f2c",
        size_bytes=48213,
    )
    assert json.loads(to_json(reference)) == {
        "type": "image",
        "uri": "s3://agent-media/sessions/sha256/9f2c",
        "mime_type": "image/png",
        "sha256": "9f2c",
        "size_bytes": 48213,
    }
    with pytest.raises(WireFormatError, match='"type": "image"'):
        from_wire(
            {"uri": "x", "mime_type": "image/png", "sha256": "a", "size_bytes": 1},
            AgentImageReference,
        )


def test_json_text_is_compact_sorted_and_keeps_non_ascii() -> None:
    text = to_json(AgentUserMessage(text="grüße"))
    assert text == '{"images":[],"plan_mode":false,"text":"grüße"}'


def test_an_event_payload_decodes_to_its_type() -> None:
    event = AgentEvent(
        type=AgentEventType.TURN_STARTED,
        payload=TurnStartedPayload(sequence=3),
        turn_id="turn-1",
        step_execution_id="AwaitUserMessage-2",
        attempt=1,
    )
    wire = to_wire(event)
    assert wire == {
        "type": "turn_started",
        "payload": {"sequence": 3},
        "turn_id": "turn-1",
        "step_execution_id": "AwaitUserMessage-2",
        "attempt": 1,
    }
    assert from_wire(wire, AgentEvent) == event


def test_an_event_refuses_a_payload_of_another_type() -> None:
    with pytest.raises(TypeError, match="turn_started needs a TurnStartedPayload"):
        AgentEvent(
            type="turn_started",
            payload={"sequence": 3},
            turn_id=None,
            step_execution_id="s",
            attempt=1,
        )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"status": "sleeping"}', "status"),
        ('{"status": "running_model", "surprise": 1}', "surprise"),
        ('{"status": "running_model", "turn_count": "three"}', "turn_count"),
    ],
)
def test_bad_wire_input_names_what_was_wrong(text: str, message: str) -> None:
    with pytest.raises(WireFormatError, match=message):
        from_json(text, AgentState)


def test_state_defaults() -> None:
    state = from_json('{"status": "waiting_for_user_message"}', AgentState)
    assert state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    assert state.accepts_turn_control is True
    assert state.last_sequence == 0
    # A state an older build stored, with no fields added since, still loads.
    assert (state.failed_turn_id, state.cancelled_turn_id) == (None, None)


def test_a_message_is_encoded_once_and_its_text_kept_with_it() -> None:
    message = AgentMessage(
        sequence=7, turn_id="turn-1", role=MessageRole.ASSISTANT, framework_item="{}", text="hé"
    )
    text = to_json(message)
    assert to_json(message) is text
    assert json_size(message) == len(text.encode("utf-8"))
    # An equal message that is another object has its own entry, with equal text.
    twin = attrs.evolve(message)
    assert twin is not message
    assert to_json(twin) == text
    assert from_json(text, AgentMessage) == message


@settings(max_examples=50, deadline=None)
@given(chunk=value_strategy(AgentMessageChunk))
def test_a_chunk_is_written_around_its_messages_kept_texts(chunk: AgentMessageChunk) -> None:
    for message in chunk.messages:
        to_json(message)  # as storing it in the window did
    assert to_json(chunk) == dumps(to_wire(chunk))


def test_a_chunk_text_escapes_and_falls_back_as_the_converter_writes() -> None:
    def message(sequence: int, text: str) -> AgentMessage:
        return AgentMessage(
            sequence=sequence, turn_id="t", role=MessageRole.USER, framework_item="{}", text=text
        )

    # Non-ASCII stays, a lone surrogate is escaped, in the messages' texts and the chunk's.
    chunk = AgentMessageChunk(
        first_sequence=9,
        last_sequence=10,
        messages=(message(9, "hé \u2028"), message(10, "\ud800")),
    )
    text = to_json(chunk)
    assert text == dumps(to_wire(chunk))
    assert '"text":"\\ud800"' in text
    assert "hé" in text
    assert from_json(text, AgentMessageChunk) == chunk
    # A sequence that is not a plain int (True == 1 passes the chunk's own check) is written
    # as the converter writes it, not as its digits.
    odd = AgentMessageChunk(first_sequence=True, last_sequence=True, messages=(message(1, "a"),))
    assert to_json(odd) == dumps(to_wire(odd))
    assert to_json(odd).startswith('{"first_sequence":true,')
