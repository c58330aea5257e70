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
        return _union_check(arguments)
    if origin is tuple and len(arguments) == 2 and arguments[1] is Ellipsis:
        each = _check(arguments[0])
        return lambda value: type(value) is tuple and all(map(each, value))
    if isinstance(hint, type) and attrs.has(hint):
        return _fields_check(hint)
    return _never


def _never(value: object) -> bool:
    return False


def _union_check(arguments: tuple[Any, ...]) -> Check:
    """A union's check, which picks the alternatives to try by the value's exact type.

    Every check here accepts values of one exact type only (``_exact_types``), so an event's
    payload goes straight to its own class's check, not through the twenty listed before it.
    """
    by_type: dict[type, list[Check]] = {}
    for argument in arguments:
        for kind in _exact_types(argument):
            by_type.setdefault(kind, []).append(_check(argument))
    checks = {kind: _any_of(tuple(found)) for kind, found in by_type.items()}
    pick = checks.get

    def union(value: object) -> bool:
        return pick(type(value), _never)(value)

    return union


def _any_of(alternatives: tuple[Check, ...]) -> Check:
    if len(alternatives) == 1:
        return alternatives[0]

    def any_of(value: object) -> bool:
        # Loops, not any() and all() over generators, here and below: they run for
        # every field of every value a Step writes.
        for alternative in alternatives:  # noqa: SIM110
            if alternative(value):
                return True
        return False

    return any_of


def _exact_types(hint: Any) -> tuple[type, ...]:
    """The types ``_check(hint)`` may accept a value of (``type(value)``, not subclasses):
    none for a hint whose check accepts nothing."""
    plain = _plain_types(hint)
    if plain is not None:
        return plain
    if hint is datetime or (isinstance(hint, type) and attrs.has(hint)):
        return (hint,)
    if typing.get_origin(hint) is tuple:
        return (tuple,)
    return ()


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
    """``cls``'s check as one expression over its fields, written and compiled as ``attrs``
    writes the class's own methods (so its field names are names in code): no loop and no
    ``getattr`` by name, since it runs for every value a Step writes."""
    hints = typing.get_type_hints(cls)
    fields = attrs.fields(cls)
    namespace: dict[str, Any] = {"cls": cls}
    terms = ["type(value) is cls"]
    for index, field in enumerate(fields):
        hint = hints[field.name]
        plain = _plain_types(hint)
        if plain is not None and len(plain) == 1:
            namespace[f"t{index}"] = plain[0]
            terms.append(f"type(value.{field.name}) is t{index}")
        elif plain is not None:
            namespace[f"t{index}"] = plain
            terms.append(f"type(value.{field.name}) in t{index}")
        else:
            namespace[f"c{index}"] = _bound_at_first_use(namespace, f"c{index}", hint)
            terms.append(f"c{index}(value.{field.name})")
    source = "def check(value):\n    return " + " and ".join(terms) + "\n"
    exec(compile(source, f"<exact check of {cls.__qualname__}>", "exec"), namespace)
    return namespace["check"]  # type: ignore[no-any-return]


def _bound_at_first_use(namespace: dict[str, Any], name: str, hint: Any) -> Check:
    """A field's check that looks up ``_check(hint)`` when first called and puts it in its
    place, so a class may name itself (or one that names it) without its check recursing
    while it is written."""

    def first_use(value: object) -> bool:
        check = namespace[name] = _check(hint)
        return check(value)

    return first_use


@functools.cache
def immutable_when_exact(cls: Any) -> bool:
    """Whether every value that ``exactly_decodable`` accepts as ``cls`` is immutable all the
    way down: each ``attrs`` class it may hold is frozen (the strings, numbers, enums, UTC
    times and tuples it accepts are immutable already). Such a value can stand for its own
    decode wherever the decode would be a fresh copy, since nobody can change it.

    A union says yes only when its decode gives each value back by its own type: a union
    of JSON's scalars (``str``, ``int``, ``float``, ``bool``, ``None``), or one type or
    ``None``. Any other may decode a value ``exactly_decodable`` accepts as another arm
    (an enum member as the plain string or number it travels as, a time as its text) or
    not at all (two value classes with the same fields, two tuple types).

    The decode builds each class again, so its converters and ``__attrs_post_init__``
    run on values they already made: they are taken to give those back (the session's
    converters make enum members and tuples). One that changes them again, as
    ``lambda text: text + "!"`` would, is not seen here.
    """
    return _immutable(cls, frozenset())


_JSON_SCALARS = (str, int, float, bool, type(None))


def _immutable(hint: Any, seen: frozenset[Any]) -> bool:
    if hint in seen:  # a class that names itself: its other fields decide
        return True
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        scalars_only = all(argument in _JSON_SCALARS for argument in arguments)
        if not scalars_only and len(arguments) - (type(None) in arguments) > 1:
            return False  # cattrs may read its JSON as another arm, or refuse it
        return all(_immutable(argument, seen) for argument in arguments)
    if _plain_types(hint) is not None or hint is datetime:
        return True
    if origin is tuple and len(arguments) == 2 and arguments[1] is Ellipsis:
        return _immutable(arguments[0], seen)
    if isinstance(hint, type) and attrs.has(hint):
        if not attrs.inspect(hint).is_frozen:
            return False
        try:
            hints = typing.get_type_hints(hint)
        except (NameError, TypeError):  # a hint that does not resolve: it cannot be checked
            return False
        inner = seen | {hint}
        return all(_immutable(hints[field.name], inner) for field in attrs.fields(hint))
    return False  # exactly_decodable accepts no value of it
