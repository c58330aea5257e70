"""Hypothesis strategies that build any domain value from its attrs field types.

Built from the resolved field types rather than listed by hand, so a value type
added to the domain is covered by the round-trip test without editing it.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs
from hypothesis import strategies as st

from dex_agents.domain.events import EVENT_PAYLOAD_TYPES, AgentEvent
from dex_agents.domain.message_index import AgentMessageChunk
from dex_agents.domain.messages import AgentMessage

_SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=8), children, max_size=3),
    ),
    max_leaves=8,
)
JSON_OBJECTS: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.text(max_size=8), JSON_VALUES, max_size=4
)


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    """A strategy for values of one resolved type hint."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return JSON_VALUES
    if hint is type(None) or hint is None:
        return st.none()
    if hint is str:
        return st.text(max_size=16)
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.integers(min_value=-(2**53), max_value=2**53)
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is datetime:
        return st.datetimes(timezones=st.just(UTC))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if hint is AgentEvent:
        return _events()
    if hint is AgentMessageChunk:
        return _chunks()
    if isinstance(hint, type) and attrs.has(hint):
        return value_strategy(hint)
    if origin in (types.UnionType, typing.Union):
        return st.one_of([strategy_for(arg) for arg in args])
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(strategy_for(args[0]), max_size=3).map(tuple)
    if origin in (Mapping, dict, typing.Mapping) and args and args[0] is str:
        return st.dictionaries(st.text(max_size=8), strategy_for(args[1]), max_size=3)
    raise NotImplementedError(f"no strategy for {hint!r}")


def value_strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    """A strategy for instances of an attrs class, one field at a time."""
    if cls is AgentEvent:
        return _events()
    if cls is AgentMessageChunk:
        return _chunks()
    attrs.resolve_types(cls)
    fields = {
        field.alias or field.name: strategy_for(field.type)
        for field in attrs.fields(cls)
        if field.init
    }
    return st.builds(cls, **fields)


def _chunks() -> st.SearchStrategy[AgentMessageChunk]:
    # A chunk holds exactly its consecutive messages, which random fields would not.
    def chunk(first: int, messages: list[AgentMessage]) -> AgentMessageChunk:
        numbered = tuple(
            attrs.evolve(message, sequence=first + offset)
            for offset, message in enumerate(messages)
        )
        return AgentMessageChunk(
            first_sequence=first, last_sequence=first + len(numbered) - 1, messages=numbered
        )

    return st.builds(
        chunk,
        st.integers(min_value=1, max_value=10**6),
        st.lists(value_strategy(AgentMessage), min_size=1, max_size=3),
    )


def _events() -> st.SearchStrategy[AgentEvent]:
    known: st.SearchStrategy[tuple[str, Any]] = st.one_of(
        [
            st.tuples(st.just(event_type), value_strategy(payload_type))
            for event_type, payload_type in sorted(EVENT_PAYLOAD_TYPES.items())
        ]
    )
    custom: st.SearchStrategy[tuple[str, Any]] = st.tuples(
        st.just("example.custom_event"), JSON_OBJECTS
    )
    return st.builds(
        lambda pair, turn_id, step_execution_id, attempt: AgentEvent(
            type=pair[0],
            payload=pair[1],
            turn_id=turn_id,
            step_execution_id=step_execution_id,
            attempt=attempt,
        ),
        st.one_of(known, custom),
        st.one_of(st.none(), st.text(max_size=8)),
        st.text(max_size=8),
        st.integers(min_value=1, max_value=5),
    )
