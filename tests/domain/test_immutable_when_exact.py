"""``immutable_when_exact``: whether every value ``exactly_decodable`` accepts as a type is
immutable all the way down, so that it may stand for its own decode."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import attrs
import pytest

from dex_agents.domain.exact_values import immutable_when_exact
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.state import AgentState


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
class _Unresolved:
    part: _NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821


def test_a_class_whose_hints_do_not_resolve_is_not_and_raises_nothing() -> None:
    assert not immutable_when_exact(_Unresolved)
