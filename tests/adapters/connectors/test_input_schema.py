"""The closed JSON Schema subset of a connector tool's ``inputSchema``."""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents.adapters.connectors.input_schema import (
    ArgumentsViolation,
    check_arguments,
    require_supported_schema,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "limit": {"anyOf": [{"type": "integer", "maximum": 10}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
        "flag": {"type": "boolean", "description": "an annotation"},
    },
    "additionalProperties": {"type": "string"},
    "$defs": {"tag": {"type": "string", "enum": ["a", "b"]}},
}


@pytest.mark.parametrize(
    "value",
    [{}, {"limit": None}, {"limit": 10}, {"limit": 3.0}, {"tags": ["a", "b"]}, {"x": "free"}],
)
def test_values_inside_the_schema_pass(value: Any) -> None:
    check_arguments(value, SCHEMA)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "the arguments must be object"),
        ({"limit": 11}, "limit matches none of its anyOf"),
        ({"limit": True}, "limit matches none of its anyOf"),
        ({"tags": ["c"]}, r"tags\[0\] must be one of"),
        ({"flag": 1}, "flag must be boolean"),
        ({"x": 1}, "x must be string"),
    ],
)
def test_values_outside_it_name_the_first_fault(value: Any, message: str) -> None:
    with pytest.raises(ArgumentsViolation, match=message):
        check_arguments(value, SCHEMA)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string", "pattern": "x"}, "'pattern'"),
        ({"properties": {"a": {"oneOf": []}}}, r"inputSchema.properties.a uses 'oneOf'"),
        ({"$ref": "https://example.com/s.json"}, "only refs into \\$defs"),
        ({"items": {"minLength": 1}}, "'minLength'"),
    ],
)
def test_a_keyword_it_cannot_check_is_refused(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        require_supported_schema(schema)
    require_supported_schema(SCHEMA)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"properties": {"a": {"$ref": "#/$defs/b"}}}, r"\$ref '#/\$defs/b', which names no entry"),
        (
            {"$defs": {"a": {"properties": {}}}, "$ref": "#/$defs/a/properties/b"},
            "names no entry of \\$defs",
        ),
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}, "a -> b -> a"),
        ({"properties": {"a": {"enum": 5}}}, r"inputSchema.properties.a enum must be a list"),
        ({"properties": {"a": {"minimum": "5"}}}, "minimum must be a number"),
        ({"type": "object", "required": "abc"}, "required must be a list of property names"),
        ({"type": "strin"}, "type must be one of"),
        ({"properties": ["a"]}, "properties must be an object"),
        ({"anyOf": {"type": "string"}}, "anyOf must be a non-empty list"),
    ],
)
def test_a_malformed_keyword_is_refused_before_any_call(schema: Any, message: str) -> None:
    # Each of these once passed here and then crashed every call, or checked the wrong thing.
    with pytest.raises(ValueError, match=message):
        require_supported_schema(schema)


@pytest.mark.parametrize(
    ("value", "enum"),
    [(True, [1]), (False, [0]), (1, [True]), ([True], [[1]]), ({"a": 0}, [{"a": False}])],
)
def test_an_enum_tells_booleans_from_numbers(value: Any, enum: list[Any]) -> None:
    # Found by an audit: enum compared with Python's ==, where True == 1, so a model's
    # true passed an enum of [0, 1] and the operation got a boolean; in JSON Schema
    # true and 1 are different values.
    with pytest.raises(ArgumentsViolation, match="must be one of"):
        check_arguments(value, {"enum": enum})


@pytest.mark.parametrize(
    ("value", "enum"), [(1.0, [1]), (2, [2.0]), ([1], [[1.0]]), (None, [None])]
)
def test_an_enum_compares_numbers_by_value(value: Any, enum: list[Any]) -> None:
    check_arguments(value, {"enum": enum})
