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
    plain = _plain_types(hint)
    if plain is not None:
        return lambda value: type(value) in plain
    if hint is datetime:
        return _utc_time
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        alternatives = tuple(_check(argument) for argument in arguments)

        def any_of(value: object) -> bool:
            # Loops, not any() and all() over generators, here and below: they run for
            # every field of every value a Step writes.
            for alternative in alternatives:  # noqa: SIM110
                if alternative(value):
                    return True
            return False

        return any_of
    if origin is tuple and len(arguments) == 2 and arguments[1] is Ellipsis:
        each = _check(arguments[0])
        return lambda value: type(value) is tuple and all(map(each, value))
    if isinstance(hint, type) and attrs.has(hint):
        return _fields_check(hint)
    return lambda value: False


def _plain_types(hint: Any) -> tuple[type, ...] | None:
    """The exact types a field of ``hint`` may hold when all are plain (strings, numbers,
    ``None``, enums), so one ``type(...) in`` answers; ``None`` when some part is not."""
    if hint in (str, int, float, bool, type(None)):
        return (hint,)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return (hint,)
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        parts = [_plain_types(argument) for argument in typing.get_args(hint)]
        if all(part is not None for part in parts):
            return tuple(kind for part in parts if part is not None for kind in part)
    return None


def _utc_time(value: object) -> bool:
    return type(value) is datetime and value.tzinfo is UTC


def _fields_check(cls: Any) -> Check:
    hints = typing.get_type_hints(cls)
    names = [field.name for field in attrs.fields(cls)]
    # Made when first used, so a class may name itself. Fields of plain types are checked
    # in one loop, the rest each by its own check.
    plain: list[tuple[str, tuple[type, ...]]] = []
    other: list[tuple[str, Check]] = []

    def check(value: object) -> bool:
        if type(value) is not cls:
            return False
        if not plain and not other:
            kinds = {name: _plain_types(hints[name]) for name in names}
            other[:] = [(name, _check(hints[name])) for name in names if kinds[name] is None]
            plain[:] = [(name, kind) for name, kind in kinds.items() if kind is not None]
        for name, allowed in plain:
            if type(getattr(value, name)) not in allowed:
                return False
        for name, field_check in other:  # noqa: SIM110
            if not field_check(getattr(value, name)):
                return False
        return True

    return check
