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
    """Raise ``ValueError`` for a keyword outside the subset, or a malformed one, at any depth.

    A checked keyword's value must have the shape ``check_arguments`` reads (``required``
    a list of names, ``enum`` a list, ``minimum`` a number, ...), and every ``$ref`` must
    name an entry of the root's ``$defs``, so a call never trips over the schema itself.
    """
    _require_supported(schema, schema, where)


_TYPES: Final = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _require_shape(keyword: str, value: object, root: object, where: str) -> None:
    """Raise ``ValueError`` when a checked keyword's value is not what ``_check`` reads."""
    at = f"{where} {keyword}"
    if keyword == "type":
        kinds = [value] if isinstance(value, str) else value
        if not isinstance(kinds, list) or not kinds or any(kind not in _TYPES for kind in kinds):
            raise ValueError(f"{at} must be one of {sorted(_TYPES)} or a list of them")
    elif keyword in ("properties", "$defs") and not isinstance(value, Mapping):
        raise ValueError(f"{at} must be an object")
    elif keyword == "required" and (
        not isinstance(value, list) or not all(isinstance(name, str) for name in value)
    ):
        raise ValueError(f"{at} must be a list of property names")
    elif keyword == "enum" and not isinstance(value, list):
        raise ValueError(f"{at} must be a list")
    elif keyword == "anyOf" and (not isinstance(value, list) or not value):
        raise ValueError(f"{at} must be a non-empty list of schemas")
    elif keyword in ("minimum", "maximum") and not _is_number(value):
        raise ValueError(f"{at} must be a number")
    elif keyword == "$ref":
        if not (isinstance(value, str) and value.startswith(_REF_PREFIX)):
            raise ValueError(f"{where} has $ref {value!r}; only refs into $defs are supported")
        definitions = root.get("$defs") if isinstance(root, Mapping) else None
        if (
            not isinstance(definitions, Mapping)
            or value.removeprefix(_REF_PREFIX) not in definitions
        ):
            raise ValueError(f"{where} has $ref {value!r}, which names no entry of $defs")


def _require_supported(schema: object, root: object, where: str) -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} is not a JSON Schema object")
    for keyword, value in schema.items():
        if keyword not in _CHECKED and keyword not in _ANNOTATIONS:
            raise ValueError(f"{where} uses {keyword!r}, which a connector tool cannot check")
        _require_shape(keyword, value, root, where)
        if keyword in ("properties", "$defs"):
            for name, sub in value.items():
                _require_supported(sub, root, f"{where}.{keyword}.{name}")
        elif keyword in ("items", "additionalProperties"):
            _require_supported(value, root, f"{where}.{keyword}")
        elif keyword == "anyOf":
            for number, sub in enumerate(value):
                _require_supported(sub, root, f"{where}.anyOf[{number}]")
    if schema is root:
        _require_no_ref_loop(root, where)


def _require_no_ref_loop(root: Mapping[str, Any], where: str) -> None:
    """A ``$ref`` chain that comes back to itself would check a value forever."""
    definitions: Mapping[str, Any] = root.get("$defs", {})
    for start in definitions:
        seen = [start]
        target = definitions[start]
        while isinstance(target, Mapping) and "$ref" in target:
            name = target["$ref"].removeprefix(_REF_PREFIX)
            if name in seen:
                raise ValueError(f"{where} $defs {' -> '.join([*seen, name])} refer in a loop")
            seen.append(name)
            target = definitions[name]


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


def _json_equal(value: object, other: object) -> bool:
    """JSON Schema's equality: numbers by value (``1`` is ``1.0``), but ``true`` is not ``1``.

    Python's ``==`` takes ``True == 1``, so an ``enum`` of ``[0, 1]`` let a boolean through.
    """
    if isinstance(value, bool) or isinstance(other, bool):
        return isinstance(value, bool) and isinstance(other, bool) and value == other
    if isinstance(value, list) and isinstance(other, list):
        return len(value) == len(other) and all(map(_json_equal, value, other))
    if isinstance(value, dict) and isinstance(other, dict):
        return value.keys() == other.keys() and all(_json_equal(value[k], other[k]) for k in value)
    return value == other


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
    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
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
