"""``exactly_decodable``: a value its JSON gives back type for type, or not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.events import AgentEvent, AgentEventType, TurnStartedPayload
from dex_agents.domain.exact_values import exactly_decodable
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.state import AgentState, AgentStatus, TurnSessionSettings
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.wire import from_json, to_json
from tests.support.wire_strategies import value_strategy


class _Usage(AgentUsage):
    pass


_IMAGE = AgentImageReference(uri="mem://a", mime_type="image/png", sha256="0" * 64, size_bytes=3)


def _message(**changes: Any) -> AgentMessage:
    fields: dict[str, Any] = {
        "sequence": 1,
        "turn_id": "turn-1",
        "role": MessageRole.USER,
        "framework_item": "{}",
        "text": "hi",
        "created_at": datetime(2026, 12, 3, 18, 0, tzinfo=UTC),
    }
    return AgentMessage(**{**fields, **changes})


def _event(event_type: Any, payload: Any) -> AgentEvent:
    return AgentEvent(
        type=event_type, payload=payload, turn_id="turn-1", step_execution_id="S-1", attempt=1
    )


@pytest.mark.parametrize(
    ("value", "cls", "exact"),
    [
        (AgentUsage(model_calls=1, input_tokens=12), AgentUsage, True),
        # JSON writes 12.0, which the strict decoder refuses for an int field.
        (AgentUsage(model_calls=1, input_tokens=12.0), AgentUsage, False),  # type: ignore[arg-type]
        (AgentUsage(model_calls=True), AgentUsage, False),
        (_Usage(model_calls=1), AgentUsage, False),
        (AgentUsage(), AgentState, False),
        (_message(), AgentMessage, True),
        (_message(images=[_IMAGE]), AgentMessage, True),  # the converter makes it a tuple
        (_message(text=None), AgentMessage, True),
        (_message(text=7), AgentMessage, False),
        (_message(created_at=None), AgentMessage, True),
        # Equal once decoded, yet not the same: a zone counts hours differently.
        (
            _message(created_at=datetime(2026, 3, 8, tzinfo=ZoneInfo("America/New_York"))),
            AgentMessage,
            False,
        ),
        (
            _message(created_at=datetime(2026, 3, 8, tzinfo=timezone(timedelta(hours=1)))),
            AgentMessage,
            False,
        ),
        (_message(created_at=datetime(2026, 3, 8)), AgentMessage, False),
        (
            AgentState(status=AgentStatus.RUNNING_MODEL, turn_started_at=datetime.now(UTC)),
            AgentState,
            True,
        ),
        (_event(AgentEventType.TURN_STARTED, TurnStartedPayload(sequence=3)), AgentEvent, True),
        (_event("order.packed", {"boxes": 2}), AgentEvent, False),
        # A mapping can be changed in place: never the same as a decode's.
        (TurnSessionSettings(turn_id="turn-1", settings={}), TurnSessionSettings, False),
    ],
)
def test_a_value_is_exact_only_when_its_json_gives_it_back_type_for_type(
    value: object, cls: Any, exact: bool
) -> None:
    assert exactly_decodable(value, cls) is exact


def test_an_event_built_from_its_enum_has_the_type_decoding_gives() -> None:
    event = _event(AgentEventType.TURN_STARTED, TurnStartedPayload(sequence=3))
    assert type(event.type) is str
    assert event == from_json(to_json(event), AgentEvent)


_SHARED = [AgentMessage, AgentState, AgentUsage, AgentEvent]


@pytest.mark.parametrize("cls", _SHARED, ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_whatever_decoding_gives_is_exact(cls: type[Any], data: st.DataObject) -> None:
    # Otherwise an engine would never keep what it wrote, and nobody would notice.
    value = data.draw(value_strategy(cls))
    decoded = from_json(to_json(value), cls)
    if cls is AgentEvent and not attrs.has(type(decoded.payload)):
        return  # a type of the session's own: its payload is a mapping
    assert exactly_decodable(decoded, cls)


@attrs.frozen
class _Node:
    label: str
    children: tuple[_Node, ...] = ()
    parent: _Node | None = None


@attrs.frozen
class _Either:
    numbers: tuple[int, ...] | tuple[str, ...]
    when: datetime | int | None = None


def test_a_class_that_names_itself_is_checked_all_the_way_down() -> None:
    leaf = _Node("leaf")
    assert exactly_decodable(_Node("root", children=(leaf,), parent=leaf), _Node)
    assert not exactly_decodable(_Node("root", children=(_Node(7),)), _Node)  # type: ignore[arg-type]
    assert not exactly_decodable(_Node("root", parent=_Node("up", parent=_Node(b"x"))), _Node)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "exact"),
    [
        (_Either((1, 2)), True),
        (_Either(("a",)), True),  # the second alternative of the same type is tried too
        (_Either((1, "a")), False),  # type: ignore[arg-type]
        (_Either([1]), False),  # type: ignore[arg-type]
        (_Either((), when=datetime(2026, 12, 7, tzinfo=UTC)), True),
        (_Either((), when=3), True),
        (_Either((), when=True), False),  # a bool is no int once decoded
        (_Either((), when=datetime(2026, 12, 7)), False),
    ],
)
def test_a_union_tries_every_alternative_of_the_value_type(value: _Either, exact: bool) -> None:
    assert exactly_decodable(value, _Either) is exact
