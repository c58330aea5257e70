"""A hand-written ``parameters_schema`` is refused at decoration where the arguments' check would break.

Each refused schema used to be taken, and every call of the tool then failed in its
tool Step (``AttributeError: 'str' object has no attribute 'get'``, ``'int' object
is not iterable``, ``arguments: expected array, got object``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from dex_agents.builtin_loop import function_tool
from dex_agents.domain.tool_effects import ToolEffect

REFUSED: list[tuple[str, Any, str]] = [
    (
        "an array at the top",
        {"type": "array", "items": {"type": "string"}},
        "at the top level: type must take an object, since a tool's arguments are a JSON "
        "object, not 'array'",
    ),
    (
        "an unknown type at the top",
        {"type": "bogus"},
        "at the top level: type 'bogus' is not a JSON type "
        "(array, boolean, integer, null, number, object, string)",
    ),
    (
        "a type name for a property's schema",
        {"type": "object", "properties": {"x": "string"}},
        "at properties.x: a schema must be a mapping, not str ('string')",
    ),
    (
        "an unknown property type",
        {"type": "object", "properties": {"x": {"type": "nope"}}},
        "at properties.x: type 'nope' is not a JSON type "
        "(array, boolean, integer, null, number, object, string)",
    ),
    (
        "an empty type list",
        {"type": "object", "properties": {"x": {"type": []}}},
        "at properties.x: type must be a JSON type name or a non-empty list of them, not list ([])",
    ),
    (
        "required as an int",
        {"type": "object", "required": 5},
        "at the top level: required must be a list of property names, not int (5)",
    ),
    (
        "required as one name",
        {"type": "object", "properties": {"x": {}}, "required": "x"},
        "at the top level: required must be a list of property names, not str ('x')",
    ),
    (
        "properties as a list",
        {"type": "object", "properties": ["x"]},
        "at the top level: properties must be a mapping of property names to schemas, "
        "not list (['x'])",
    ),
    (
        "an int key",
        {1: {"type": "string"}},
        "at the top level: a schema's keys must be str, not int (1)",
    ),
    (
        "enum as a str",
        {"type": "object", "properties": {"x": {"enum": "abc"}}},
        "at properties.x: enum must be a list, not str ('abc')",
    ),
    (
        "an empty anyOf",
        {"type": "object", "properties": {"x": {"anyOf": []}}},
        "at properties.x: anyOf must be a non-empty list of schemas, not list ([])",
    ),
    (
        "an anyOf alternative that is no schema",
        {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, "null"]}}},
        "at properties.x.anyOf.1: a schema must be a mapping, not str ('null')",
    ),
    (
        "items of an unknown type",
        {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "str"}}}},
        "at properties.x.items: type 'str' is not a JSON type "
        "(array, boolean, integer, null, number, object, string)",
    ),
    (
        "additionalProperties as a str",
        {"type": "object", "additionalProperties": "no"},
        "at additionalProperties: a schema must be a mapping, not str ('no')",
    ),
]


def _tool(x: str = "") -> str:
    return x


@pytest.mark.parametrize(
    ("schema", "message"),
    [pytest.param(schema, message, id=name) for name, schema, message in REFUSED],
)
def test_a_schema_the_arguments_check_cannot_read_is_refused_naming_where(
    schema: Any, message: str
) -> None:
    expected = f"tool _tool: parameters_schema {message}"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        function_tool(effect=ToolEffect.READ, parameters_schema=schema)(_tool)


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "object"},
        {"type": ["object", "null"]},
        {"type": "object", "properties": {"x": {"type": "string", "minLength": 1}}},
        # Keywords the check does not read pass as they are.
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "object", "properties": {"x": {"type": "array", "items": [{"type": "string"}]}}},
        {"type": "object", "additionalProperties": False, "required": ("x",)},
        {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"const": 1}]}}},
    ],
)
def test_a_schema_in_the_subset_or_beyond_what_it_reads_is_taken(schema: Any) -> None:
    tool = function_tool(effect=ToolEffect.READ, parameters_schema=schema)(_tool)
    assert tool.parameters_schema == schema
