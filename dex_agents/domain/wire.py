"""The JSON wire form of every session value: one cattrs converter, shared by every engine.

Keys are the snake_case field names, enums travel as their plain string values,
tuples as arrays, datetimes as ISO 8601 text, and an ``AgentImageReference``
carries ``"type": "image"``. ``to_json`` writes compact UTF-8 text with sorted
keys and non-ASCII characters unescaped, so two engines that store the same value
store the same bytes. Decoding refuses unknown keys and wrong types with a
``WireFormatError`` that names the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

import cattrs
from cattrs.preconf.json import make_converter

from dex_agents.domain.errors import WireFormatError
from dex_agents.domain.events import EVENT_PAYLOAD_TYPES, AgentEvent
from dex_agents.domain.images import AgentImageReference

T = TypeVar("T")

converter = make_converter(forbid_extra_keys=True)
"""The one converter of the JSON wire form."""

_IMAGE_TYPE = "image"


def _unstructure_image(reference: AgentImageReference) -> dict[str, Any]:
    return {
        "type": _IMAGE_TYPE,
        "uri": reference.uri,
        "mime_type": reference.mime_type,
        "sha256": reference.sha256,
        "size_bytes": reference.size_bytes,
    }


_structure_image_fields = cattrs.gen.make_dict_structure_fn(
    AgentImageReference, converter, _cattrs_forbid_extra_keys=True
)


def _structure_image(data: Any, _cls: type[AgentImageReference]) -> AgentImageReference:
    if not isinstance(data, Mapping):
        raise WireFormatError("an image reference must be a JSON object")
    if data.get("type") != _IMAGE_TYPE:
        raise WireFormatError(f'an image reference needs "type": "{_IMAGE_TYPE}"')
    return _structure_image_fields({k: v for k, v in data.items() if k != "type"}, _cls)


def _unstructure_event(event: AgentEvent) -> dict[str, Any]:
    payload = event.payload
    return {
        "type": event.type,
        "payload": dict(payload)
        if isinstance(payload, Mapping)
        else converter.unstructure(payload),
        "turn_id": event.turn_id,
        "step_execution_id": event.step_execution_id,
        "attempt": event.attempt,
    }


def _structure_event(data: Any, _cls: type[AgentEvent]) -> AgentEvent:
    if not isinstance(data, Mapping):
        raise WireFormatError("an agent event must be a JSON object")
    extra = set(data) - {"type", "payload", "turn_id", "step_execution_id", "attempt"}
    if extra:
        raise WireFormatError(f"an agent event has unknown keys: {sorted(extra)}")
    event_type = data.get("type")
    if not isinstance(event_type, str):
        raise WireFormatError("an agent event needs a string type")
    payload_type = EVENT_PAYLOAD_TYPES.get(event_type)
    raw_payload = data.get("payload")
    if not isinstance(raw_payload, Mapping):
        raise WireFormatError(f"event {event_type} needs a JSON object payload")
    payload = (
        raw_payload if payload_type is None else converter.structure(raw_payload, payload_type)
    )
    turn_id = data.get("turn_id")
    step_execution_id = data.get("step_execution_id")
    attempt = data.get("attempt")
    if turn_id is not None and not isinstance(turn_id, str):
        raise WireFormatError("an agent event's turn_id must be a string or null")
    if not isinstance(step_execution_id, str):
        raise WireFormatError("an agent event needs a string step_execution_id")
    if not isinstance(attempt, int) or isinstance(attempt, bool):
        raise WireFormatError("an agent event needs an integer attempt")
    return AgentEvent(
        type=event_type,
        payload=payload,
        turn_id=turn_id,
        step_execution_id=step_execution_id,
        attempt=attempt,
    )


# A StrEnum is a str, and str comes before Enum in its MRO, so without this hook
# it would leave the converter as the enum member; the wire carries plain strings.
converter.register_unstructure_hook(StrEnum, lambda member: member.value)


def _structure_none(data: Any, _cls: Any) -> None:
    if data is not None:
        raise WireFormatError(f"expected null, not {type(data).__name__}")


# Steps and RPCs without an input take ``None``; the wire carries it as null.
converter.register_structure_hook(type(None), _structure_none)
converter.register_unstructure_hook(AgentImageReference, _unstructure_image)
converter.register_structure_hook(AgentImageReference, _structure_image)
converter.register_unstructure_hook(AgentEvent, _unstructure_event)
converter.register_structure_hook(AgentEvent, _structure_event)


def to_wire(value: object) -> Any:
    """Return the JSON-compatible wire value of a session value."""
    return converter.unstructure(value)


def from_wire(data: Any, cls: type[T]) -> T:
    """Decode a JSON-compatible wire value into ``cls``; raise ``WireFormatError`` if it does not fit."""
    try:
        return converter.structure(data, cls)
    except WireFormatError:
        raise
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as error:
        detail = (
            "; ".join(cattrs.transform_error(error))
            if isinstance(error, cattrs.BaseValidationError)
            else str(error)
        )
        raise WireFormatError(f"invalid {cls.__name__}: {detail}") from error


def dumps(data: Any) -> str:
    """Write a JSON-compatible value as the project's canonical JSON text."""
    return json.dumps(
        data, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
    )


def to_json(value: object) -> str:
    """Encode a session value as canonical JSON text."""
    return dumps(to_wire(value))


def from_json(text: str | bytes, cls: type[T]) -> T:
    """Decode JSON text into ``cls``; raise ``WireFormatError`` for text that is not valid JSON of it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise WireFormatError(f"invalid {cls.__name__}: not valid JSON ({error})") from error
    return from_wire(data, cls)


def json_size(value: object) -> int:
    """The size in bytes of a value's canonical UTF-8 JSON text."""
    return len(to_json(value).encode("utf-8"))
