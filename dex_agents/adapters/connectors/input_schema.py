"""The closed JSON Schema 2020-12 subset a connector tool's ``inputSchema`` may use.

``require_supported_schema`` refuses a keyword the checker does not know when the tool is
built; ``check_arguments`` checks decoded JSON arguments and names the first fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["ArgumentsViolation", "check_arguments", "require_supported_schema"]

_CHECKED: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf",
     "$ref", "$defs", "minimum", "maximum"}
)  # fmt: skip
_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
     "$schema", "$id", "$comment", "format"}
)  # fmt: skip
_REF_PREFIX: Final = "#/$defs/"


class ArgumentsViolation(ValueError):
    """Arguments that break the operation's ``inputSchema``."""


def require_supported_schema(schema: object, where: str = "inputSchema") -> None:
    """Raise ``ValueError`` for a keyword outside the subset, at any depth."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} is not a JSON Schema object")
    for keyword, value in schema.items():
        if keyword not in _CHECKED and keyword not in _ANNOTATIONS:
            raise ValueError(f"{where} uses {keyword!r}, which a connector tool cannot check")
        if keyword in ("properties", "$defs"):
            for name, sub in value.items():
                require_supported_schema(sub, f"{where}.{keyword}.{name}")
        elif keyword in ("items", "additionalProperties"):
            require_supported_schema(value, f"{where}.{keyword}")
        elif keyword == "anyOf":
            for number, sub in enumerate(value):
                require_supported_schema(sub, f"{where}.anyOf[{number}]")
        elif keyword == "$ref" and not (isinstance(value, str) and value.startswith(_REF_PREFIX)):
            raise ValueError(f"{where} has $ref {value!r}; only refs into $defs are supported")


def _type_matches(value: object, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return False


def _at(path: str) -> str:
    return path or "the arguments"


def _check(value: object, schema: Any, root: Mapping[str, Any], path: str) -> None:
    if schema is True:
        return
    if schema is False:
        raise ArgumentsViolation(f"{_at(path)} is not allowed")
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(_REF_PREFIX)
        _check(value, root.get("$defs", {})[name], root, path)
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_type_matches(value, kind) for kind in kinds):
            raise ArgumentsViolation(f"{_at(path)} must be {' or '.join(kinds)}")
    if "enum" in schema and value not in schema["enum"]:
        raise ArgumentsViolation(f"{_at(path)} must be one of {schema['enum']!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ArgumentsViolation(f"{_at(path)} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ArgumentsViolation(f"{_at(path)} must be at most {schema['maximum']}")
    if "anyOf" in schema:
        _check_any_of(value, schema["anyOf"], root, path)
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                raise ArgumentsViolation(f"{_at(path)} is missing {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            where = f"{path}.{name}" if path else name
            if name in properties:
                _check(item, properties[name], root, where)
            else:
                if extra is False:
                    raise ArgumentsViolation(f"{where} is not an argument of this tool")
                _check(item, extra, root, where)
    if isinstance(value, list) and "items" in schema:
        for number, item in enumerate(value):
            _check(item, schema["items"], root, f"{path}[{number}]")


def _check_any_of(
    value: object, options: Sequence[Any], root: Mapping[str, Any], path: str
) -> None:
    for option in options:
        try:
            _check(value, option, root, path)
        except ArgumentsViolation:
            continue
        return
    raise ArgumentsViolation(f"{_at(path)} matches none of its anyOf schemas")


def check_arguments(arguments: object, schema: Mapping[str, Any]) -> None:
    """Raise ``ArgumentsViolation`` naming the first place ``arguments`` break ``schema``."""
    _check(arguments, schema, schema, "")
