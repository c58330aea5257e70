"""JSON Schemas of function tool arguments, derived from type hints with the standard library.

``json_schema_for_type`` turns one type hint into a JSON Schema: ``str``, ``int``,
``float``, ``bool``, ``None``, ``list``/``list[T]``, ``dict``/``dict[str, T]``,
``Literal``, ``Enum``, unions (``anyOf``; ``Optional[T]`` is ``anyOf`` with
``null``), dataclasses, ``TypedDict`` and ``Annotated[T, "description"]``. Every
schema is inlined (no ``$ref``), so a recursive dataclass is refused.
``convert_json_value`` turns a value valid for such a schema into the hinted
Python type; ``json_validation.py`` checks a decoded value against a schema.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin

from dex_agents.app.builtin_loop.json_validation import (
    JsonSchemaViolation,
    json_type_name,
    validate_json_value,
)

__all__ = ["convert_json_value", "json_schema_for_type", "type_hint_name"]

SUPPORTED_TYPES_TEXT = (
    "str, int, float, bool, None, list, dict[str, T], Literal, Enum, unions, "
    'dataclasses, TypedDict and Annotated[T, "description"]'
)

_SCALAR_SCHEMAS: Mapping[object, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    None: "null",
    type(None): "null",
}


def type_hint_name(hint: object) -> str:
    """A type hint as a reader writes it: ``set[int]``, ``Point``, ``Any``."""
    if isinstance(hint, type) and get_origin(hint) is None:
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


def _unsupported(hint: object, where: str) -> TypeError:
    return TypeError(
        f"{where} has an unsupported type {type_hint_name(hint)}; "
        f"function tools take {SUPPORTED_TYPES_TEXT}"
    )


def _literal_schema(values: Sequence[object], hint: object, where: str) -> dict[str, Any]:
    kinds: list[str] = []
    for value in values:
        if value is not None and not isinstance(value, str | int | float | bool):
            raise _unsupported(hint, where)
        kind = json_type_name(value)
        if kind not in kinds:
            kinds.append(kind)
    schema: dict[str, Any] = {"enum": list(values)}
    if len(kinds) == 1:
        return {"type": kinds[0], **schema}
    return schema


def _object_schema(
    fields: Mapping[str, object],
    required: Sequence[str],
    owner: str,
    where: str,
    seen: frozenset[object],
) -> dict[str, Any]:
    properties = {
        name: _schema(hint, f"{where} (field {name} of {owner})", seen)
        for name, hint in fields.items()
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _unwrap_required(hint: object) -> object:
    if get_origin(hint) in (Required, NotRequired):
        return get_args(hint)[0]
    return hint


def _class_hints(cls: type, where: str) -> dict[str, object]:
    try:
        return dict(typing.get_type_hints(cls, include_extras=True))
    except Exception as error:
        raise TypeError(
            f"{where}: cannot resolve the type hints of {cls.__qualname__}: {error}"
        ) from error


def _dataclass_fields(cls: type, where: str) -> tuple[dict[str, object], list[str]]:
    hints = _class_hints(cls, where)
    fields: dict[str, object] = {}
    required: list[str] = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        fields[field.name] = hints[field.name]
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            required.append(field.name)
    return fields, required


def _schema(hint: object, where: str, seen: frozenset[object]) -> dict[str, Any]:
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is typing.Annotated:
        schema = _schema(args[0], where, seen)
        descriptions = [item for item in hint.__metadata__ if isinstance(item, str)]  # type: ignore[attr-defined]
        if descriptions:
            schema = {**schema, "description": descriptions[0]}
        return schema
    for scalar, kind in _SCALAR_SCHEMAS.items():
        if hint is scalar:
            return {"type": kind}
    if hint is list:
        return {"type": "array"}
    if hint is dict:
        return {"type": "object"}
    if origin is list and len(args) == 1:
        return {"type": "array", "items": _schema(args[0], where, seen)}
    if origin is dict and len(args) == 2 and args[0] is str:
        return {"type": "object", "additionalProperties": _schema(args[1], where, seen)}
    if origin is Literal:
        return _literal_schema(args, hint, where)
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [_schema(member, where, seen) for member in args]}
    if origin is not None or not isinstance(hint, type):
        raise _unsupported(hint, where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _literal_schema([member.value for member in hint], hint, where)
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)):
        if hint in seen:
            raise TypeError(
                f"{where} has a recursive type {type_hint_name(hint)}; "
                "function tool schemas are inlined and cannot refer to themselves"
            )
        inner = seen | {hint}
        if typing.is_typeddict(hint):
            raw = _class_hints(hint, where)
            required_keys: frozenset[str] = getattr(hint, "__required_keys__", frozenset())
            # Under postponed annotations the class cannot see NotRequired in its own
            # strings, so the resolved hints decide over __required_keys__.
            required = [
                name
                for name, field in raw.items()
                if get_origin(field) is Required
                or (get_origin(field) is not NotRequired and name in required_keys)
            ]
            hints = {name: _unwrap_required(field) for name, field in raw.items()}
            return _object_schema(hints, required, hint.__qualname__, where, inner)
        fields, required = _dataclass_fields(hint, where)
        return _object_schema(fields, required, hint.__qualname__, where, inner)
    raise _unsupported(hint, where)


def json_schema_for_type(hint: object, *, where: str = "a value") -> dict[str, Any]:
    """The JSON Schema of values of the type hint ``hint``.

    Raise ``TypeError`` for a type outside the supported set, naming ``where``
    (such as ``tool lookup_order: parameter order_id``) and the type.
    """
    return _schema(hint, where, frozenset())


def _matches(value: object, hint: object) -> bool:
    try:
        validate_json_value(value, json_schema_for_type(hint))
    except (JsonSchemaViolation, TypeError):
        return False
    return True


def convert_json_value(value: object, hint: object) -> Any:
    """``value``, valid for ``json_schema_for_type(hint)``, as the Python type ``hint``.

    Dataclasses and Enums are built, a ``TypedDict`` stays a ``dict``, a whole
    number becomes ``int`` for ``int`` and any number ``float`` for ``float``. A
    union takes its first member that the value matches. A type outside the
    supported set keeps the decoded value, for a tool with its own schema.
    Errors of a dataclass or Enum constructor propagate.
    """
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is typing.Annotated:
        return convert_json_value(value, args[0])
    if value is None:
        return None
    if hint is int and isinstance(value, float):
        return int(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin is list and len(args) == 1 and isinstance(value, list):
        return [convert_json_value(item, args[0]) for item in value]
    if origin is dict and len(args) == 2 and isinstance(value, Mapping):
        return {key: convert_json_value(item, args[1]) for key, item in value.items()}
    if origin is Union or origin is types.UnionType:
        for member in args:
            if _matches(value, member):
                return convert_json_value(value, member)
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if isinstance(hint, type) and isinstance(value, Mapping):
        if typing.is_typeddict(hint):
            hints = typing.get_type_hints(hint, include_extras=True)
            return {
                key: convert_json_value(item, _unwrap_required(hints.get(key, Any)))
                for key, item in value.items()
            }
        if dataclasses.is_dataclass(hint):
            fields, _ = _dataclass_fields(hint, hint.__qualname__)
            return hint(
                **{
                    key: convert_json_value(item, fields.get(key, Any))
                    for key, item in value.items()
                }
            )
    return value
