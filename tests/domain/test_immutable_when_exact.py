"""``immutable_when_exact``: whether every value ``exactly_decodable`` accepts as a type is
immutable all the way down, so that it may stand for its own decode."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import attrs
import cattrs
import pytest

from dex_agents.domain.errors import WireFormatError
from dex_agents.domain.exact_values import exactly_decodable, immutable_when_exact
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.state import AgentState
from dex_agents.domain.wire import from_json, to_json


class _Kind(StrEnum):
    A = "a"


@attrs.frozen
class _Leaf:
    number: int
    when: datetime | None = None
    kind: _Kind = _Kind.A


@attrs.define
class _Open:
    text: str


@attrs.frozen
class _Holds:
    inner: _Open


@attrs.frozen
class _Tree:
    label: str
    children: tuple[_Tree, ...] = ()


@pytest.mark.parametrize(
    "hint",
    [
        str,
        int | None,
        type(None),
        _Kind,
        datetime,
        _Leaf,
        tuple[_Leaf, ...],
        _Leaf | None,
        _Tree,  # names itself
        AgentUserMessage,
        AgentState,
        str | int | float | bool | None,  # JSON's scalars, each decoded as its own type
        _Kind | None,
    ],
)
def test_frozen_values_all_the_way_down_are_immutable(hint: Any) -> None:
    assert immutable_when_exact(hint)


@pytest.mark.parametrize(
    "hint",
    [_Open, _Holds, tuple[_Open, ...], _Open | None, dict[str, str], list[int], object],
)
def test_a_value_that_may_hold_a_changeable_part_is_not(hint: Any) -> None:
    assert not immutable_when_exact(hint)


@attrs.frozen
class _Other:
    number: int


@attrs.frozen
class _Choice:
    choice: str | _Kind


@pytest.mark.parametrize(
    ("hint", "value"),
    [
        (str | _Kind, _Kind.A),  # decoded as the plain string "a"
        (_Kind | str, _Kind.A),
        (_Choice, _Choice(_Kind.A)),
        (datetime | str, datetime(2026, 12, 8, tzinfo=UTC)),  # decoded as its text
        (_Leaf | _Other, _Other(1)),  # no field tells them apart: not decoded at all
        (tuple[int, ...] | tuple[str, ...], (1,)),  # no decode for it
    ],
)
def test_a_union_whose_decode_may_read_a_value_as_another_arm_is_not(
    hint: Any, value: object
) -> None:
    # Each value is exact, and its decode is not it: it cannot stand for its decode.
    assert exactly_decodable(value, hint)
    assert not _given_back(value, hint)
    assert not immutable_when_exact(hint)


def _given_back(value: object, hint: Any) -> bool:
    try:
        decoded = from_json(to_json(value), hint)
    except (WireFormatError, cattrs.errors.StructureHandlerNotFoundError):
        return False
    return bool(decoded == value) and _types(decoded) == _types(value)


def _types(value: Any) -> object:
    if attrs.has(type(value)):
        return type(value), [_types(getattr(value, f.name)) for f in attrs.fields(type(value))]
    if isinstance(value, tuple):
        return [_types(item) for item in value]
    return type(value)


@attrs.frozen
class _Unresolved:
    part: _NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821


def test_a_class_whose_hints_do_not_resolve_is_not_and_raises_nothing() -> None:
    assert not immutable_when_exact(_Unresolved)
