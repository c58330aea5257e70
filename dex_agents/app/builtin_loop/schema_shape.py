"""Checks a hand-written ``parameters_schema`` where ``validate_json_value`` reads it.

A function tool's arguments are checked against its schema on every call, by the
subset of JSON Schema in ``json_validation``. A schema that breaks that subset's
shape was taken at decoration and failed every call inside its tool Step: a
``"properties": {"x": "string"}`` with ``AttributeError: 'str' object has no
attribute 'get'``, a ``"required": 5`` with ``'int' object is not iterable``, a
``"type": "array"`` with ``arguments: expected array, got object`` (a tool's
arguments are always an object). ``check_schema_shape`` refuses these up front.
It checks only the keywords the validator reads, so a schema's other keywords
(``$ref``, ``minimum``, ``format``, ...) pass as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["JSON_TYPES", "check_schema_shape"]

JSON_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
"""The names JSON Schema's ``type`` keyword takes."""


def _where(path: tuple[str, ...]) -> str:
    return "at " + ".".join(path) if path else "at the top level"


def _kind(value: object) -> str:
    return "None" if value is None else f"{type(value).__name__} ({value!r:.40})"


def _check_type(kinds: object, path: tuple[str, ...]) -> list[str]:
    names = [kinds] if isinstance(kinds, str) else kinds
    if not isinstance(names, list | tuple) or not names:
        raise ValueError(
            f"{_where(path)}: type must be a JSON type name or a non-empty list of them, "
            f"not {_kind(kinds)}"
        )
    for name in names:
        if name not in JSON_TYPES:
            raise ValueError(
                f"{_where(path)}: type {name!r} is not a JSON type "
                f"({', '.join(sorted(JSON_TYPES))})"
            )
    return list(names)


def _check_node(schema: object, path: tuple[str, ...]) -> None:
    if not isinstance(schema, Mapping):
        raise ValueError(f"{_where(path)}: a schema must be a mapping, not {_kind(schema)}")
    for key in schema:
        if not isinstance(key, str):
            raise ValueError(f"{_where(path)}: a schema's keys must be str, not {_kind(key)}")
    if "type" in schema:
        _check_type(schema["type"], path)
    enum = schema.get("enum")
    if "enum" in schema and not isinstance(enum, list | tuple):
        raise ValueError(f"{_where(path)}: enum must be a list, not {_kind(enum)}")
    if "anyOf" in schema:
        alternatives = schema["anyOf"]
        if not isinstance(alternatives, list | tuple) or not alternatives:
            raise ValueError(
                f"{_where(path)}: anyOf must be a non-empty list of schemas, "
                f"not {_kind(alternatives)}"
            )
        for index, alternative in enumerate(alternatives):
            _check_node(alternative, (*path, "anyOf", str(index)))
    # A list of items is draft 4's tuple form, which the validator does not read.
    if isinstance(schema.get("items"), Mapping):
        _check_node(schema["items"], (*path, "items"))
    _check_object_keywords(schema, path)


def _check_object_keywords(schema: Mapping[str, Any], path: tuple[str, ...]) -> None:
    if "properties" in schema:
        properties = schema["properties"]
        if not isinstance(properties, Mapping):
            raise ValueError(
                f"{_where(path)}: properties must be a mapping of property names "
                f"to schemas, not {_kind(properties)}"
            )
        for name, property_schema in properties.items():
            _check_node(property_schema, (*path, "properties", str(name)))
    if "required" in schema:
        required = schema["required"]
        if not isinstance(required, list | tuple) or not all(
            isinstance(name, str) for name in required
        ):
            raise ValueError(
                f"{_where(path)}: required must be a list of property names, not {_kind(required)}"
            )
    extra = schema.get("additionalProperties", True)
    if not isinstance(extra, bool):
        _check_node(extra, (*path, "additionalProperties"))


def check_schema_shape(schema: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the path where ``schema`` breaks the validator's subset.

    The top level must take an object (a tool's arguments are one): its ``type``, when
    given, names ``object``. Wherever the validator reads it, ``type`` is a JSON type
    name or a list of them, a schema is a mapping with ``str`` keys, ``properties`` maps
    names to schemas, ``required`` lists names, ``enum`` is a list, ``anyOf`` a non-empty
    list of schemas, ``items`` (as a mapping) and ``additionalProperties`` (unless a
    ``bool``) schemas.
    """
    _check_node(schema, ())
    if "type" in schema and "object" not in _check_type(schema["type"], ()):
        raise ValueError(
            f"at the top level: type must take an object, since a tool's arguments are "
            f"a JSON object, not {schema['type']!r}"
        )
