"""The JSON wire form of every session value: one cattrs converter, shared by every engine.

Keys are the snake_case field names, enums travel as their plain string values,
tuples as arrays, datetimes as ISO 8601 text, and an ``AgentImageReference``
carries ``"type": "image"``. ``to_json`` writes compact UTF-8 text with sorted
keys and non-ASCII characters unescaped, so two engines that store the same value
store the same bytes. Decoding refuses unknown keys and wrong types with a
``WireFormatError`` that names the field, e.g. ``invalid ResolveInterruptRequest:
approved: expected a bool, not str``.

Decoding never coerces: a ``str`` field takes only a string, an ``int`` field
only an integer (not ``true``, ``1.5`` or ``"5"``), a ``bool`` field only
``true`` or ``false``, a ``float`` field a number but not a boolean, a value
class only a JSON object, and a tuple or list only a JSON array (not a string,
whose characters cattrs would take as the items). Every engine decodes RPC,
Step and Flow inputs through this converter, so ``{"approved": "false"}`` is
refused everywhere rather than read as ``True``.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory as tuple_factory
from cattrs.cols import list_structure_factory
from cattrs.preconf.json import make_converter

from dex_agents.domain.canonical_json import dumps, loads
from dex_agents.domain.errors import WireFormatError
from dex_agents.domain.events import EVENT_PAYLOAD_TYPES, AgentEvent
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.message_index import AgentMessageChunk
from dex_agents.domain.messages import AgentMessage

T = TypeVar("T")

converter = make_converter(forbid_extra_keys=True)
"""The one converter of the JSON wire form."""


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _structure_str(data: Any, cls: type[str]) -> str:
    # cattrs would call ``str(data)``, turning ``None`` into the text "None".
    if not isinstance(data, str):
        raise WireFormatError(f"expected a str, not {_kind(data)}")
    # A StrEnum dispatches here too (``str`` is in its MRO): build the member.
    return data if cls is str else cls(data)


def _structure_int(data: Any, cls: type[int]) -> int:
    # ``int()`` would read "5" as 5, truncate 1.9 to 1 and take True as 1.
    if isinstance(data, bool) or not isinstance(data, int):
        raise WireFormatError(f"expected an int, not {_kind(data)}")
    return data if cls is int else cls(data)


def _structure_bool(data: Any, _cls: type[bool]) -> bool:
    # ``bool()`` would read "false" as True: the one coercion that approves a write.
    if not isinstance(data, bool):
        raise WireFormatError(f"expected a bool, not {_kind(data)}")
    return data


def _structure_float(data: Any, _cls: type[float]) -> float:
    # JSON has one number type, so an integer is a valid float; a boolean is not.
    if isinstance(data, bool) or not isinstance(data, int | float):
        raise WireFormatError(f"expected a float, not {_kind(data)}")
    try:
        return float(data)
    except OverflowError:
        raise WireFormatError(f"the integer {data} is too large for a float") from None


def _structure_object_factory(cls: type[Any]) -> Callable[[Any, Any], Any]:
    structure = converter.gen_structure_attrs_fromdict(cls)

    def structure_object(data: Any, target: Any) -> Any:
        # The generated function would fail on ``data.keys()`` with an AttributeError.
        # (A dict first: JSON objects decode to one, and the ABC's check costs a call.)
        if type(data) is not dict and not isinstance(data, Mapping):
            raise WireFormatError(f"expected a JSON object, not {_kind(data)}")
        return structure(data, target)

    return structure_object


def _is_array(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        return len(args) == 2 and args[1] is Ellipsis
    return origin is list or origin is Sequence


def _structure_array_factory(hint: Any) -> Callable[[Any, Any], Any]:
    factory = list_structure_factory if typing.get_origin(hint) is list else tuple_factory
    structure = factory(hint, converter)

    def structure_array(data: Any, target: Any) -> Any:
        # A string or an object is iterable too, but it is no JSON array: cattrs
        # would make a tuple of its characters or keys.
        if not isinstance(data, list | tuple):
            raise WireFormatError(f"expected a JSON array, not {_kind(data)}")
        return structure(data, target)

    return structure_array


_SCALARS = (str, int, bool, float, datetime)


def _is_optional_scalar(hint: Any) -> bool:
    args = typing.get_args(hint)
    return (
        typing.get_origin(hint) in (typing.Union, types.UnionType)
        and len(args) == 2
        and type(None) in args
        and any(arg in _SCALARS for arg in args)
    )


def _structure_optional_factory(hint: Any) -> Callable[[Any, Any], Any]:
    inner = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    structure = converter.get_structure_hook(inner)

    def structure_optional(data: Any, _target: Any) -> Any:
        # cattrs' own Optional hook looks the inner type's hook up again at every value.
        return None if data is None else structure(data, inner)

    return structure_optional


# Registered before any structure function is generated (the image hook below is
# built at import), because generated functions bind their field hooks once.
converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(bool, _structure_bool)
converter.register_structure_hook(float, _structure_float)
converter.register_structure_hook_factory(attrs.has, _structure_object_factory)
converter.register_structure_hook_factory(_is_array, _structure_array_factory)
converter.register_structure_hook_factory(_is_optional_scalar, _structure_optional_factory)

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


def _describe(error: BaseException, hint: Any) -> str:
    # Our hooks already say what they expected; for the rest, cattrs's own words,
    # plus the error's own text where cattrs's would hide it ("invalid value").
    if isinstance(error, WireFormatError):
        return str(error)
    described = cattrs.v.format_exception(error, hint)
    if isinstance(error, KeyError | cattrs.ForbiddenExtraKeysError) or not str(error):
        return described
    return f"{described} ({error})"


def _at(path: str, detail: str) -> str:
    return f"{path}: {detail}" if path else detail


def _problems(error: BaseException, path: str = "") -> list[str]:
    """Every fault in a cattrs validation error, each as ``<field path>: <what was wrong>``.

    The same walk as ``cattrs.transform_error``, with the path first and without
    its ``$`` root, so a message reads ``approved: expected a bool, not str``.
    """
    located: list[tuple[BaseException, str, Any]]
    without: list[Exception]
    if isinstance(error, cattrs.IterableValidationError):
        items, without = error.group_exceptions()
        located = [(inner, f"{path}[{note.index!r}]", note.type) for inner, note in items]
    elif isinstance(error, cattrs.ClassValidationError):
        fields, without = error.group_exceptions()
        located = [
            (inner, f"{path}.{note.name}" if path else note.name, note.type)
            for inner, note in fields
        ]
    else:
        return [_at(path, _describe(error, None))]
    problems: list[str] = []
    for inner, inner_path, hint in located:
        if isinstance(inner, cattrs.IterableValidationError | cattrs.ClassValidationError):
            problems.extend(_problems(inner, inner_path))
        else:
            problems.append(_at(inner_path, _describe(inner, hint)))
    problems.extend(_at(path, _describe(inner, None)) for inner in without)
    return problems


def from_wire(data: Any, cls: type[T]) -> T:
    """Decode a JSON-compatible wire value into ``cls``; raise ``WireFormatError`` if it does not fit.

    The message names the type and each faulty field by its path, e.g.
    ``invalid AgentUserMessage: images[0].size_bytes: expected an int, not str``.
    """
    try:
        return converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as error:
        detail = "; ".join(_problems(error))
        name = getattr(cls, "__name__", repr(cls))
        raise WireFormatError(f"invalid {name}: {detail}") from error


_NONE_TYPE = type(None)


_TEXTS_KEPT = 4096
_TEXTS_MOST_CHARS = 16 * 1024 * 1024
_texts: dict[int, tuple[AgentMessage, str, int]] = {}
_texts_chars = 0


def _message_text(message: AgentMessage) -> tuple[str, int]:
    # A commit sizes the whole window for its chunk plan (json_size) and stores its new
    # messages: each message is encoded and sized once. A message is frozen all the way
    # down, so its text stays true; the entry keeps the message alive, so the id is its
    # own (hashing a message to look it up cost more than encoding it).
    global _texts_chars
    kept = _texts.get(id(message))
    if kept is not None and kept[0] is message:
        return kept[1], kept[2]
    text = dumps(to_wire(message))
    size = len(text.encode("utf-8"))
    if len(_texts) >= _TEXTS_KEPT or _texts_chars + len(text) > _TEXTS_MOST_CHARS:
        _texts.clear()
        _texts_chars = 0
    _texts[id(message)] = (message, text, size)
    _texts_chars += len(text)
    return text, size


def _chunk_text(chunk: AgentMessageChunk) -> str:
    # A chunk is written once, when its messages roll over from the window, and each of
    # them was encoded when it was stored there (``_message_text`` keeps that text), so the
    # chunk is its fields around those texts: what ``dumps(to_wire(chunk))`` writes, keys in
    # sorted order, without unstructuring and encoding every message again.
    first, last = chunk.first_sequence, chunk.last_sequence
    if type(first) is not int or type(last) is not int or type(chunk.messages) is not tuple:
        return dumps(to_wire(chunk))  # not what the fields declare: the converter says how
    texts = []
    for message in chunk.messages:
        if type(message) is not AgentMessage:
            return dumps(to_wire(chunk))
        texts.append(_message_text(message)[0])
    messages = ",".join(texts)
    return f'{{"first_sequence":{first},"last_sequence":{last},"messages":[{messages}]}}'


def to_json(value: object) -> str:
    """Encode a session value as canonical JSON text."""
    if value is None:  # no input, no output: most Steps' and RPCs'
        return "null"
    if type(value) is AgentMessage:
        return _message_text(value)[0]
    if type(value) is AgentMessageChunk:
        return _chunk_text(value)
    return dumps(to_wire(value))


def from_json(text: str | bytes, cls: type[T]) -> T:
    """Decode JSON text into ``cls``; raise ``WireFormatError`` for text that is not valid JSON of it."""
    if cls is _NONE_TYPE and text == "null":
        # Most Steps and RPCs take no input and return none: a turn decodes about six.
        return typing.cast(T, None)
    try:
        data = loads(text)
    except json.JSONDecodeError as error:
        raise WireFormatError(f"invalid {cls.__name__}: not valid JSON ({error})") from error
    return from_wire(data, cls)


def json_size(value: object) -> int:
    """The size in bytes of a value's canonical UTF-8 JSON text."""
    if type(value) is AgentMessage:
        return _message_text(value)[1]
    return len(to_json(value).encode("utf-8"))
