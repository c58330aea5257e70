"""``exactly_decodable`` against the decode itself: a yes only where the wire form gives
the value back type for type, for the cases a written value could get wrong."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from enum import IntEnum, StrEnum
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dex_agents.adapters.local.decoded_values import WRITTEN_ONLY_TYPES, WRITTEN_TYPES
from dex_agents.domain.errors import WireFormatError
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.exact_values import exactly_decodable
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.domain.wire import from_json, to_json
from tests.support.wire_strategies import value_strategy


class _Kind(StrEnum):
    A = "a"


class _OtherKind(StrEnum):
    A = "a"


class _Count(IntEnum):
    ONE = 1


@attrs.frozen
class _Leaf:
    number: int


@attrs.frozen
class _Part:
    kind: _Kind
    _hidden: str
    leaf: _Leaf | None = None
    parts: tuple[_Part, ...] = ()
    parent: _Part | None = None
    when: datetime | None = None
    share: float = 0.0
    count: _Count = _Count.ONE
    value: int = 0  # named as the generated check's argument


class _SubPart(_Part):
    pass


def _decodes_to_itself(value: object, cls: Any) -> bool:
    """Whether the wire form gives ``value`` back: same types all the way down, and a
    time in the very same zone object."""
    try:
        text = to_json(value)
    except (AttributeError, TypeError, ValueError):
        return False  # nothing to store: the write itself fails
    try:
        decoded = from_json(text, cls)
    except WireFormatError:
        return False
    return _same(value, decoded)


def _same(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if attrs.has(type(left)):
        fields = attrs.fields(type(left))
        return all(_same(getattr(left, f.name), getattr(right, f.name)) for f in fields)
    if isinstance(left, tuple):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, datetime):
        return bool(left == right and left.tzinfo is right.tzinfo)
    return bool(left == right)


_PART = _Part(_Kind.A, "h", leaf=_Leaf(1), parts=(_Part(_Kind.A, "k"),), parent=_Part(_Kind.A, "p"))


def _with(original: Any, /, **fields: object) -> Any:
    # Through the constructor, as a Step builds its values (``attrs.evolve``): its converters
    # and validators run, and what they let through is what the check alone has to judge.
    aliases = {field.name: field.alias for field in attrs.fields(type(original))}
    return attrs.evolve(original, **{aliases[name]: value for name, value in fields.items()})


@pytest.mark.parametrize(
    ("value", "exact", "decodes"),
    [
        (_PART, True, True),
        (_with(_PART, kind="a"), False, False),  # a str where the enum member belongs
        (_with(_PART, kind=_OtherKind.A), False, False),  # a member of another enum
        (_with(_PART, kind=MessageRole.USER), False, False),
        (_with(_PART, count=1), False, False),  # an int where an IntEnum member belongs
        (_with(_PART, value=True), False, False),  # a bool for an int
        (_with(_PART, value=_Count.ONE), False, False),  # an int subclass
        (_with(_PART, value=1.0), False, False),
        (_with(_PART, share=1), False, False),  # an int for a float
        (_with(_PART, _hidden=7), False, False),  # a field named with a leading underscore
        (_with(_PART, _hidden=_Kind.A), False, False),  # a str subclass
        (_with(_PART, when=datetime(2026, 12, 7, tzinfo=UTC)), True, True),
        # A naive time is given back naive, yet refused: a session's times are UTC.
        (_with(_PART, when=datetime(2026, 12, 7)), False, True),
        (
            _with(_PART, when=datetime(2026, 12, 7, tzinfo=timezone(timedelta(0), "Z"))),
            False,
            False,
        ),  # UTC's offset, another zone
        (_with(_PART, leaf=_Leaf(True)), False, False),
        (_SubPart(_Kind.A, "s"), False, False),  # a subclass of the class
        (_with(_PART, parent=_SubPart(_Kind.A, "s")), False, False),
        (_with(_PART, leaf=_Part(_Kind.A, "x")), False, False),  # a class of another union
        (_with(_PART, parts=[_Part(_Kind.A, "k")]), False, False),  # a list for a tuple
        (_with(_PART, parts=(_with(_PART, kind="a"),)), False, False),  # recursive, one level down
        (_with(_PART, parent=_with(_PART, parent=_with(_PART, value=False))), False, False),
    ],
)
def test_a_value_is_exact_only_when_its_decode_gives_it_back(
    value: _Part, exact: bool, decodes: bool
) -> None:
    assert exactly_decodable(value, _Part) is exact
    assert _decodes_to_itself(value, _Part) is decodes


@pytest.mark.parametrize("given_as", [AgentStatus.RUNNING_MODEL, "running_model"])
def test_an_enum_field_holds_its_member_whether_built_or_decoded(given_as: str) -> None:
    built = AgentState(status=given_as)
    assert type(built.status) is AgentStatus
    assert exactly_decodable(built, AgentState)
    assert _decodes_to_itself(built, AgentState)


_WRONG: tuple[object, ...] = (
    "a",
    1,
    1.5,
    True,
    None,
    _Kind.A,
    _Count.ONE,
    datetime(2026, 12, 7),
    datetime(2026, 12, 7, tzinfo=UTC),
    datetime(2026, 12, 7, tzinfo=timezone(timedelta(hours=1))),
    (),
    ("a",),
    [1],
    _Leaf(1),
)


def _changed(value: Any, depth: int = 0) -> Iterator[Any]:
    """``value``, and copies of it with one field (here or one level down) holding another
    kind of value."""
    yield value
    if not attrs.has(type(value)) or depth > 1:
        return
    for field in attrs.fields(type(value)):
        if type(value) is AgentEvent and field.name == "type":
            continue  # the constructor ties the payload's class to it
        inner = getattr(value, field.name)
        replacements: list[object] = list(_WRONG)
        if attrs.has(type(inner)):
            replacements += _changed(inner, depth + 1)
        if type(inner) is tuple and inner and attrs.has(type(inner[0])):
            replacements += [(changed, *inner[1:]) for changed in _changed(inner[0], depth + 1)]
        for replacement in replacements:
            try:
                yield _with(value, **{field.name: replacement})
            except (AttributeError, TypeError, ValueError):
                continue  # refused by the constructor or its validators: never written


@pytest.mark.parametrize("cls", sorted(WRITTEN_TYPES | WRITTEN_ONLY_TYPES, key=repr))
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_kept_written_value_is_what_its_decode_gives(cls: Any, data: st.DataObject) -> None:
    # A written value an engine keeps stands for its decode: no yes where they differ.
    for value in _changed(data.draw(value_strategy(cls)), 0):
        if exactly_decodable(value, cls):
            assert _decodes_to_itself(value, cls), value
