"""Whether a value is exactly what decoding its JSON gives back: same types, all the way down.

An engine that keeps a value it wrote as the decoded value of its text
(``DecodedValues.written``) must not keep one that the text would not give
back: an ``int`` field holding a float (JSON writes ``12.0``, which the
strict decoder refuses), a ``bool`` where an ``int`` belongs, a subclass, a
time in a zone other than UTC (decoded, it compares equal but counts hours
across a daylight-saving change otherwise), an enum member where the field
is a plain string. ``exactly_decodable`` says yes only when every field has
the very type that decoding gives; for any type it does not know (a mapping,
a list), no.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import attrs

Check = Callable[[object], bool]


def exactly_decodable(value: object, cls: Any) -> bool:
    """Whether ``value`` is of ``cls`` and equal, field by field and type by type, to the
    decode of its canonical JSON."""
    return _check(cls)(value)


@functools.cache
def _check(hint: Any) -> Check:
    if hint in (str, int, float, bool):
        return lambda value: type(value) is hint
    if hint is type(None):
        return lambda value: value is None
    if hint is datetime:
        return lambda value: type(value) is datetime and value.tzinfo is UTC
    if isinstance(hint, type) and issubclass(hint, Enum):
        return lambda value: type(value) is hint
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        alternatives = tuple(_check(argument) for argument in arguments)
        return lambda value: any(check(value) for check in alternatives)
    if origin is tuple and len(arguments) == 2 and arguments[1] is Ellipsis:
        each = _check(arguments[0])
        return lambda value: type(value) is tuple and all(map(each, value))
    if isinstance(hint, type) and attrs.has(hint):
        return _fields_check(hint)
    return lambda value: False


def _fields_check(cls: Any) -> Check:
    hints = typing.get_type_hints(cls)
    names = [field.name for field in attrs.fields(cls)]
    # Each field's check is made when first used, so a class may name itself.
    checks: list[tuple[str, Check]] = []

    def check(value: object) -> bool:
        if type(value) is not cls:
            return False
        if not checks:
            checks[:] = [(name, _check(hints[name])) for name in names]
        return all(field_check(getattr(value, name)) for name, field_check in checks)

    return check
