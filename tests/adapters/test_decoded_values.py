"""The process-wide cache of decoded stored values: what it shares, what it never shares."""

from __future__ import annotations

import enum
import types
import typing
from datetime import UTC, date, datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.adapters.local.decoded_values import (
    CACHED_TYPES,
    DECODED,
    WRITTEN_TYPES,
    DecodedValues,
)
from dex_agents.adapters.local.registry import register_flows
from dex_agents.adapters.local.sqlite_store import StoredValueError
from dex_agents.adapters.local.staged_state import (
    StagedState,
)
from dex_agents.adapters.local.state_sources import (
    Snapshot,
    SnapshotSource,
)
from dex_agents.adapters.local.step_context import LocalStepContext
from dex_agents.domain.events import AgentEvent, TextDeltaPayload, TurnStartedPayload
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.kept_memory import CACHE_ENTRY_BYTES, memory_of
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.state import AgentState, AgentStatus, TurnSessionSettings
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports.persistence import AttributeDef, AttributeMapDef
from dex_agents.ports.session_schema import SESSION_SCHEMA, agent_events_stream
from tests.adapters.engine_flows import EngineTestFlow
from tests.adapters.flow_store_rows import execution
from tests.support.wire_strategies import value_strategy

_LEAVES = (str, int, float, bool, type(None), datetime, date, timedelta)


def _frozen(cls: type[Any]) -> bool:
    instance = object.__new__(cls)
    try:
        setattr(instance, attrs.fields(cls)[0].name, None)
    except attrs.exceptions.FrozenInstanceError:
        return True
    return False


def deeply_immutable(hint: Any, seen: frozenset[Any] = frozenset()) -> bool:
    """Whether no value of ``hint`` can be changed in place, however deep."""
    if hint in _LEAVES or hint in seen:
        return True
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return True
    origin = typing.get_origin(hint)
    if origin is tuple or origin is typing.Union or origin is types.UnionType:
        return all(
            deeply_immutable(arg, seen) for arg in typing.get_args(hint) if arg is not Ellipsis
        )
    if origin is typing.Literal:
        return True
    if isinstance(hint, type) and attrs.has(hint):
        if not _frozen(hint):
            return False
        fields = typing.get_type_hints(hint)
        return all(deeply_immutable(field, seen | {hint}) for field in fields.values())
    return False


@pytest.mark.parametrize("cls", sorted(CACHED_TYPES, key=repr), ids=repr)
def test_every_shared_type_is_immutable_all_the_way_down(cls: Any) -> None:
    assert deeply_immutable(cls), f"{cls!r} holds a part a caller could change"


@pytest.mark.parametrize(
    ("hint", "immutable"),
    [
        (AgentState, True),
        (tuple[AgentState, ...], True),
        (AgentState | None, True),
        # These hold a dict: sharing one decoded value would let a Step change another's.
        (AgentEvent, False),
        (TurnSessionSettings, False),
        (dict[str, str], False),
        (list[str], False),
    ],
    ids=repr,
)
def test_the_immutability_rule_tells_a_dict_apart(hint: Any, immutable: bool) -> None:
    assert deeply_immutable(hint) is immutable


def test_every_state_type_that_is_immutable_is_shared() -> None:
    # A new immutable Attribute type decoded afresh by every Step is a slowdown nobody sees.
    types_of_schema = {
        definition.value_type
        for definition in SESSION_SCHEMA
        if isinstance(definition, AttributeDef | AttributeMapDef)
    }
    missed = {cls for cls in types_of_schema if deeply_immutable(cls)} - CACHED_TYPES
    assert not missed, f"immutable Attribute types not in CACHED_TYPES: {missed}"


def test_values_are_charged_their_memory_and_the_oldest_go_past_the_bound() -> None:
    # An AgentState takes over twice its text's characters, text and objects together:
    # a bound of three of them keeps three, not the six that their characters would fit.
    texts = [
        to_json(AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=n))
        for n in range(4)
    ]
    entry = (texts[0], from_json(texts[0], AgentState))  # as the cache keeps it, in a tuple
    one = memory_of((entry,))
    assert one > 2 * len(texts[0])
    one += CACHE_ENTRY_BYTES  # what the cache's maps take for it
    values = DecodedValues(max_bytes=3 * one + one // 3)  # each differs by a few bytes
    decoded = [values.decode(text, AgentState) for text in texts]
    assert all(
        values.decode(text, AgentState) is value
        for text, value in zip(texts[1:], decoded[1:], strict=True)
    )
    assert values.decode(texts[0], AgentState) is not decoded[0]


def test_a_value_that_takes_more_than_the_bound_is_not_kept() -> None:
    # Ten characters of text are within a quarter of the bound, but the text and its
    # str take over a hundred bytes.
    values = DecodedValues(max_bytes=40)
    text = '"abcdefgh"'
    assert values.decode(text, str) == "abcdefgh"
    assert values.decode(text, str) is not values.decode(text, str)


def test_a_shared_type_decodes_once_and_a_mutable_one_every_time() -> None:
    values = DecodedValues()
    text = to_json(AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=3))
    first = values.decode(text, AgentState)
    assert first == AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=3)
    assert values.decode(text, AgentState) is first
    settings = to_json(TurnSessionSettings(turn_id="turn-1", settings={"model": "a"}))
    fresh = values.decode(settings, TurnSessionSettings)
    again = values.decode(settings, TurnSessionSettings)
    assert fresh == again
    assert fresh is not again


def test_the_cache_forgets_the_oldest_values_beyond_its_bytes() -> None:
    values = DecodedValues(max_bytes=1000)
    texts = [
        to_json(AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=n))
        for n in range(10)
    ]
    decoded = [values.decode(text, AgentState) for text in texts]
    assert values.decode(texts[-1], AgentState) is decoded[-1]
    assert values.decode(texts[0], AgentState) is not decoded[0]
    assert values.decode(texts[0], AgentState) == decoded[0]


def test_a_damaged_value_is_reported_and_not_kept() -> None:
    values = DecodedValues()
    with pytest.raises(StoredValueError, match="a stored value does not decode"):
        values.decode('{"status": "no such status"}', AgentState)
    with pytest.raises(StoredValueError):
        values.decode('{"status": "no such status"}', AgentState)


def test_a_decoded_time_keeps_its_zone() -> None:
    values = DecodedValues()
    started = datetime(2026, 12, 1, 16, 0, tzinfo=UTC)
    text = to_json(AgentState(status=AgentStatus.RUNNING_MODEL, turn_started_at=started))
    assert values.decode(text, AgentState).turn_started_at == started


def _states(first: int, count: int) -> list[str]:
    return [
        to_json(AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=n))
        for n in range(first, first + count)
    ]


def test_a_sequence_read_again_gives_the_same_values_in_a_list_of_its_own() -> None:
    values = DecodedValues()
    texts = _states(0, 3)
    first = values.decode_all(texts, AgentState)
    again = values.decode_all(list(texts), AgentState)
    assert again == first
    assert again is not first
    assert all(a is b for a, b in zip(first, again, strict=True))
    again.clear()  # a caller's list is its own
    assert values.decode_all(texts, AgentState) == first
    changed = [*texts[:2], *_states(99, 1)]
    decoded = values.decode_all(changed, AgentState)
    assert [state.turn_count for state in decoded] == [0, 1, 99]
    assert decoded[0] is first[0]


@pytest.mark.parametrize(
    ("kept", "read"),
    [
        ((0, 10), (0, 11)),  # a commit added one message
        ((0, 10), (0, 14)),  # four: the most looked for
        ((0, 10), (0, 15)),  # five: each new text looked up alone
        ((0, 10), (2, 12)),  # the window lost its oldest
        ((0, 10), (0, 9)),  # shorter
        ((0, 1), (0, 3)),
    ],
)
def test_a_sequence_that_extends_a_kept_one_decodes_as_each_text_does(
    kept: tuple[int, int], read: tuple[int, int]
) -> None:
    values = DecodedValues()
    texts = _states(0, 20)
    values.decode_all(texts[kept[0] : kept[1]], AgentState)
    decoded = values.decode_all(texts[read[0] : read[1]], AgentState)
    assert [state.turn_count for state in decoded] == list(range(*read))
    assert values.decode_all(texts[read[0] : read[1]], AgentState) == decoded


def test_a_mutable_type_is_decoded_afresh_in_a_sequence_too() -> None:
    values = DecodedValues()
    texts = [to_json(TurnSessionSettings(turn_id="turn-1", settings={"model": "a"}))]
    first = values.decode_all(texts, TurnSessionSettings)
    again = values.decode_all(texts, TurnSessionSettings)
    assert first == again
    assert first[0] is not again[0]
    assert values.sequences_kept == 0


def test_the_kept_sequences_are_bounded_in_count_and_in_bytes() -> None:
    by_count = DecodedValues(max_sequences=2)
    for first in range(5):
        by_count.decode_all(_states(first, 2), AgentState)
    assert by_count.sequences_kept == 2
    size = len(_states(0, 1)[0])
    # A quarter of the cache's bytes: two texts' worth here.
    by_bytes = DecodedValues(max_bytes=4 * 2 * size)
    by_bytes.decode_all(_states(0, 3), AgentState)
    assert by_bytes.sequences_kept == 0
    for first in range(3):
        by_bytes.decode_all(_states(first, 1), AgentState)
    assert by_bytes.sequences_kept == 2


def _message(sequence: int) -> AgentMessage:
    return AgentMessage(
        sequence=sequence,
        turn_id="turn-1",
        role=MessageRole.TOOL,
        framework_item='{"type": "function_call_output"}',
        tool_call_id="call-1",
        tool_output="shipped",
        images=(
            AgentImageReference(
                uri="mem://a", mime_type="image/png", sha256="0" * 64, size_bytes=3
            ),
        ),
        created_at=datetime(2026, 12, 3, 17, 0, tzinfo=UTC),
    )


def test_a_written_message_is_what_a_read_of_its_text_gives() -> None:
    values = DecodedValues()
    message = _message(1)
    text = to_json(message)
    values.written(text, AgentMessage, message)
    # A read gets the text from the store: an equal string, not the same object.
    read = "".join(list(text))
    assert read is not text
    assert values.decode(read, AgentMessage) is message
    assert values.decode_all([read], AgentMessage)[0] is message


def test_only_written_types_stand_for_their_decoded_values() -> None:
    values = DecodedValues()
    # A value that holds a dict is decoded afresh for every read, however it was written.
    settings = TurnSessionSettings(turn_id="turn-1", settings={"model": "a"})
    values.written(to_json(settings), TurnSessionSettings, settings)
    assert values.decode(to_json(settings), TurnSessionSettings) is not settings
    # A value of another type than the map's is never kept for it.
    message = _message(2)
    values.written(to_json(message), AgentState, message)
    with pytest.raises(StoredValueError):
        values.decode(to_json(message), AgentState)


@pytest.mark.parametrize("cls", sorted(WRITTEN_TYPES, key=repr), ids=repr)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_written_value_stands_for_an_equal_decode(cls: Any, data: st.DataObject) -> None:
    # Nothing in a written value can change (it is one of CACHED_TYPES), and what its JSON
    # gives back is equal to it type for type, so a read cannot tell the two apart.
    assert cls in CACHED_TYPES
    text = to_json(data.draw(value_strategy(cls)))
    value = from_json(text, cls)  # the exact form: times in UTC, tuples, no subclass
    values = DecodedValues()
    values.written(text, cls, value)
    assert values.decode("".join(list(text)), cls) is value


def test_a_written_value_its_text_would_not_give_back_is_not_kept() -> None:
    # The file's next reader refuses a float in an int field; so must this process.
    values = DecodedValues()
    usage = AgentUsage(model_calls=1, input_tokens=12.0)  # type: ignore[arg-type]
    values.written(to_json(usage), AgentUsage, usage)
    with pytest.raises(StoredValueError, match="input_tokens"):
        values.decode(to_json(usage), AgentUsage)


def test_a_written_event_with_its_types_payload_is_what_its_reader_gets() -> None:
    values = DecodedValues()
    event = AgentEvent(
        type="turn_started",
        payload=TurnStartedPayload(sequence=4),
        turn_id="turn-1",
        step_execution_id="RunModel-1",
        attempt=1,
    )
    text = to_json(event)
    assert values.decode(text, AgentEvent) is not values.decode(text, AgentEvent)
    values.written(text, AgentEvent, event)
    assert values.decode("".join(list(text)), AgentEvent) is event


async def test_a_live_event_a_step_writes_is_what_a_reader_in_its_process_gets() -> None:
    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        return True

    async def flush(events: list[str]) -> bool:
        return True

    row = execution()
    context = LocalStepContext(
        register_flows([EngineTestFlow()])["EngineTest"],
        row,
        StagedState(row.flow_id, SnapshotSource(Snapshot()), ()),
        datetime(2026, 12, 1, tzinfo=UTC),
        beat=beat,
        flush=flush,
        flush_interval=timedelta(hours=1),
    )
    event = AgentEvent(
        type="text_delta",
        payload=TextDeltaPayload(text="live"),
        turn_id="turn-1",
        step_execution_id="RunModel-1",
        attempt=1,
    )
    context.write_event(agent_events_stream(), event)
    [text] = context.close()
    # A client of this process following the session reads the event, not a decode of it.
    assert DECODED.decode("".join(list(text)), AgentEvent) is event


def test_an_event_with_a_mapping_payload_is_decoded_for_each_reader() -> None:
    # A payload of a type of the session's own is a dict: a reader could change it.
    values = DecodedValues()
    event = AgentEvent(
        type="order.packed", payload={"boxes": 2}, turn_id=None, step_execution_id="S-1", attempt=1
    )
    text = to_json(event)
    values.written(text, AgentEvent, event)
    first, second = values.decode(text, AgentEvent), values.decode(text, AgentEvent)
    assert first == second == event
    assert first is not event
    assert second is not first


def test_pairs_keep_their_keys_in_order_with_the_values_decode_all_gives() -> None:
    values = DecodedValues()
    texts = _states(0, 3)
    held = [("c", texts[0]), ("a", texts[1]), ("b", texts[2])]
    pairs = values.decode_pairs(held, AgentState)
    assert [key for key, _ in pairs] == ["c", "a", "b"]
    assert all(
        a is b for (_, a), b in zip(pairs, values.decode_all(texts, AgentState), strict=True)
    )
