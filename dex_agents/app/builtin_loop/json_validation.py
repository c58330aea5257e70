"""Checks a decoded JSON value against the subset of JSON Schema function tools use.

``validate_json_value`` knows the keywords ``json_schema_for_type`` writes, and
its ``JsonSchemaViolation`` names the path of the value that is wrong.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["JsonSchemaViolation", "json_type_name", "validate_json_value"]

_LARGEST_EXACT_INTEGER = 2**53


class JsonSchemaViolation(ValueError):
    """A decoded JSON value that breaks its schema; the message names the path."""


def json_type_name(value: object) -> str:
    """The JSON type of a decoded JSON value: ``string``, ``integer``, ``number``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _has_type(value: object, kind: str) -> bool:
    actual = json_type_name(value)
    if kind == "number":
        return actual in ("integer", "number")
    if kind == "integer" and actual == "number":
        number = float(typing.cast(float, value))
        # Past 2**53 a float is no longer the integer the text wrote (12345678901234567890.0
        # reads as ...7168), so only a whole number that is exact counts as an integer.
        return number.is_integer() and abs(number) <= _LARGEST_EXACT_INTEGER
    return actual == kind


def _path_text(path: tuple[str | int, ...]) -> str:
    if not path:
        return "arguments"
    text = str(path[0])
    for segment in path[1:]:
        text += f"[{segment}]" if isinstance(segment, int) else f".{segment}"
    return text


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _types_of(schema: Mapping[str, Any]) -> list[str]:
    kinds = schema.get("type")
    if kinds is None:
        return []
    return [kinds] if isinstance(kinds, str) else list(kinds)


def _describe(schema: Mapping[str, Any]) -> str:
    if "const" in schema:
        return _shown(schema["const"])
    if "enum" in schema:
        return " or ".join(_shown(value) for value in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_describe(alternative) for alternative in schema["anyOf"])
    return " or ".join(_types_of(schema)) or "any value"


def _check(value: object, schema: Mapping[str, Any], path: tuple[str | int, ...]) -> None:
    where = _path_text(path)
    kinds = _types_of(schema)
    if kinds and not any(_has_type(value, kind) for kind in kinds):
        raise JsonSchemaViolation(
            f"{where}: expected {' or '.join(kinds)}, got {json_type_name(value)}"
        )
    if "const" in schema and value != schema["const"]:
        raise JsonSchemaViolation(
            f"{where}: expected {_shown(schema['const'])}, got {_shown(value)}"
        )
    if "enum" in schema and not any(
        value == allowed and json_type_name(value) == json_type_name(allowed)
        for allowed in schema["enum"]
    ):
        allowed = ", ".join(_shown(item) for item in schema["enum"])
        raise JsonSchemaViolation(f"{where}: {_shown(value)} is not one of {allowed}")
    if "anyOf" in schema:
        _check_any_of(value, schema["anyOf"], path)
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _check(item, schema["items"], (*path, index))
    if isinstance(value, Mapping):
        _check_object(value, schema, path)


def _check_any_of(
    value: object, alternatives: Sequence[Mapping[str, Any]], path: tuple[str | int, ...]
) -> None:
    errors: list[JsonSchemaViolation] = []
    for alternative in alternatives:
        try:
            _check(value, alternative, path)
        except JsonSchemaViolation as error:
            errors.append(error)
        else:
            return
    same_type = [
        error
        for alternative, error in zip(alternatives, errors, strict=True)
        if any(_has_type(value, kind) for kind in _types_of(alternative))
    ]
    if len(same_type) == 1:
        # Only one alternative takes this JSON type, so its own error says what is wrong.
        raise same_type[0]
    if same_type and isinstance(value, Mapping | list | tuple):
        # "expected object or object" tells nothing: each alternative's error does.
        reasons = "; ".join(str(error) for error in same_type)
        raise JsonSchemaViolation(f"{_path_text(path)}: matches no alternative: {reasons}")
    expected = " or ".join(_describe(alternative) for alternative in alternatives)
    raise JsonSchemaViolation(
        f"{_path_text(path)}: expected {expected}, got {json_type_name(value)}"
    )


def _check_object(
    value: Mapping[str, Any], schema: Mapping[str, Any], path: tuple[str | int, ...]
) -> None:
    where = _path_text(path)
    properties: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            raise JsonSchemaViolation(f"{where}: missing required property {name}")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            _check(item, properties[name], (*path, name))
        elif extra is False:
            raise JsonSchemaViolation(f"{where}: unexpected property {name}")
        elif isinstance(extra, Mapping):
            _check(item, extra, (*path, name))


def validate_json_value(
    value: object, schema: Mapping[str, Any], path: tuple[str | int, ...] = ()
) -> None:
    """Raise ``JsonSchemaViolation`` when ``value`` breaks ``schema``.

    The validator knows ``type``, ``enum``, ``const``, ``anyOf``, ``items``,
    ``properties``, ``required`` and ``additionalProperties``: the keywords
    ``json_schema_for_type`` writes. It ignores every other keyword of a
    hand-written schema. The message starts with the path of the value that is
    wrong, such as ``items[2].name``, or ``arguments`` for the whole value.
    """
    _check(value, schema, path)
