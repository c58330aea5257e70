"""The built-in loop's remembered walk over earlier turns gives the input a fresh walk gives.

``turn_conversation`` resumes each session's walk where the previous model call
left it (``PrefixCache``). Every case builds a conversation, walks it once
after forgetting every walk and once resumed, and requires the two inputs to
be equal; a case also says whether the resumed call found a walk to resume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from dex_agents.app.builtin_loop import conversation
from dex_agents.app.builtin_loop.conversation import Conversation, turn_conversation
from dex_agents.app.builtin_loop.items import (
    model_output_message,
    tool_result_message,
    user_text_message,
)
from dex_agents.app.message_store import MESSAGE_LINEAGE, all_messages
from dex_agents.app.prefix_cache import PrefixCache
from dex_agents.domain.context_summary import ContextSummary
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import AgentMessage, FrameworkMessage
from dex_agents.domain.model_io import ModelOutputItem, ModelToolCall, ToolResultItem
from dex_agents.domain.plans import AgentPlan, AgentTodo, PlanStatus
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.ports.runner import AgentTurnContext
from tests.app.stored_messages_state import StoredMessagesState
from tests.app.test_builtin_loop import RecordingWriter, no_heartbeat

_NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _call(call_id: str) -> FrameworkMessage:
    return model_output_message(
        ModelOutputItem(
            item=f'{{"call":"{call_id}"}}',
            provider="scripted",
            api="scripted",
            tool_calls=(ModelToolCall(tool_call_id=call_id, tool_name="lookup", arguments="{}"),),
        )
    )


def _answer(text: str) -> FrameworkMessage:
    return model_output_message(
        ModelOutputItem(item=f'{{"text":"{text}"}}', provider="scripted", api="scripted", text=text)
    )


def _result(call_id: str) -> FrameworkMessage:
    return tool_result_message(
        ToolResultItem(tool_call_id=call_id, tool_name="lookup", output=f"result {call_id}")
    )


def _tool_turn(turn: int) -> list[FrameworkMessage]:
    return [
        user_text_message(f"question {turn}"),
        _call(f"c{turn}"),
        _result(f"c{turn}"),
        _answer(f"answer {turn}"),
    ]


def _stored(turns: list[tuple[str, list[FrameworkMessage]]]) -> tuple[AgentMessage, ...]:
    messages: list[AgentMessage] = []
    for turn_id, framework_messages in turns:
        for message in framework_messages:
            messages.append(
                AgentMessage.from_framework_message(
                    message, sequence=len(messages) + 1, turn_id=turn_id
                )
            )
    return tuple(messages)


def _record(call_id: str, turn_id: str, output: str) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        tool_name="lookup",
        arguments="{}",
        turn_id=turn_id,
        effect=ToolEffect.READ,
        requires_approval=False,
        status=ToolCallStatus.SUCCEEDED,
        deferral_order=0,
        output=output,
    )


def _context(messages: tuple[AgentMessage, ...], turn_id: str, **fields: Any) -> AgentTurnContext:
    return AgentTurnContext(
        flow_id=fields.pop("flow_id", "s1"),
        turn_id=turn_id,
        attempt=1,
        messages=messages,
        events=RecordingWriter(),
        heartbeat=no_heartbeat,
        **fields,
    )


def _history(turns: int) -> list[tuple[str, list[FrameworkMessage]]]:
    return [(f"t{turn}", _tool_turn(turn)) for turn in range(1, turns + 1)]


def _fresh(turn: AgentTurnContext) -> Conversation:
    conversation._WALKED.clear()
    return turn_conversation(turn)


@pytest.fixture(autouse=True)
def _forget_walks() -> None:
    conversation._WALKED.clear()


Case = Callable[[], tuple[AgentTurnContext, AgentTurnContext, bool]]
"""A case: the call that leaves a walk, the call that may resume it, and whether it does."""


def _next_turn() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    history = _history(5)
    earlier = _stored([*history, ("t6", [user_text_message("question 6")])])
    later = _stored([*history, ("t6", _tool_turn(6)), ("t7", [user_text_message("question 7")])])
    return _context(earlier, "t6"), _context(later, "t7"), True


def _same_turn_after_its_tool_result() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    history = _history(5)
    earlier = _stored([*history, ("t6", [user_text_message("question 6")])])
    later = _stored([*history, ("t6", _tool_turn(6)[:3])])
    return _context(earlier, "t6"), _context(later, "t6", framework_run_state="{}"), True


def _unstored_result_read_from_records() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    # Turn t2's call has no stored result: its input comes from the records,
    # which changed between the calls, so the walk must not have kept it.
    turns = [("t1", _tool_turn(1)), ("t2", _tool_turn(2)[:2]), ("t3", _tool_turn(3))]
    earlier = _stored([*turns, ("t4", [user_text_message("question 4")])])
    later = _stored([*turns, ("t4", _tool_turn(4)), ("t5", [user_text_message("question 5")])])
    return (
        _context(earlier, "t4"),
        _context(later, "t5", tool_calls={"c2": _record("c2", "t2", "late output")}),
        True,
    )


_PLAN = AgentPlan(
    revision=1,
    status=PlanStatus.ACTIVE,
    todos=(AgentTodo(content="look it up", status="pending"),),
)


def _plan_note_in_this_turn() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    history = _history(3)
    earlier = _stored([*history, ("t4", [user_text_message("question 4")])])
    later = _stored([*history, ("t4", _tool_turn(4)[:3])])
    fields: dict[str, Any] = {"plan": _PLAN, "interaction_mode": InteractionMode.CHAT}
    return _context(earlier, "t4", **fields), _context(later, "t4", **fields), True


def _this_turn_already_walked() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    # A walk that covered messages of the turn now running is not resumed:
    # the plan note goes before that turn's first message.
    history = _history(3)
    earlier = _stored([*history, ("t4", [user_text_message("question 4")])])
    return _context(earlier, "t9"), _context(earlier, "t4", plan=_PLAN), False


def _oldest_messages_deleted() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    history = _history(6)
    earlier = _stored([*history, ("t7", [user_text_message("question 7")])])
    later = earlier[8:]
    return _context(earlier, "t7"), _context(later, "t7"), False


def _another_session_with_the_same_id() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    earlier = _stored([*_history(3), ("t4", [user_text_message("question 4")])])
    other = [(f"t{turn}", _tool_turn(turn + 10)) for turn in range(1, 4)]
    later = _stored([*other, ("t4", [user_text_message("question 4")])])
    return _context(earlier, "t4"), _context(later, "t4"), False


def _summary_first() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    summary = ContextSummary(
        generation=1, last_sequence=8, text="they asked about orders", created_at=_NOW
    )
    history = _history(4)
    earlier = _stored([*history, ("t5", [user_text_message("question 5")])])
    later = _stored([*history, ("t5", _tool_turn(5)), ("t6", [user_text_message("question 6")])])
    return (
        _context(earlier, "t5", context_summary=summary),
        _context(later, "t6", context_summary=summary),
        True,
    )


def _images_in_an_earlier_turn() -> tuple[AgentTurnContext, AgentTurnContext, bool]:
    image = AgentImageReference(
        uri="memory://a", mime_type="image/png", sha256="a" * 64, size_bytes=3
    )
    history = [("t1", [user_text_message("see this", [image]), _answer("seen")]), *_history(2)]
    earlier = _stored([*history, ("t3", [user_text_message("question 3")])])
    later = _stored([*history, ("t3", _tool_turn(3)), ("t4", [user_text_message("question 4")])])
    return _context(earlier, "t3"), _context(later, "t4"), True


CASES: dict[str, Case] = {
    "the next turn": _next_turn,
    "the same turn after its tool result": _same_turn_after_its_tool_result,
    "a result read from the records": _unstored_result_read_from_records,
    "a plan note in this turn": _plan_note_in_this_turn,
    "this turn already walked": _this_turn_already_walked,
    "the oldest messages deleted": _oldest_messages_deleted,
    "another session with the same ID": _another_session_with_the_same_id,
    "a summary first": _summary_first,
    "images in an earlier turn": _images_in_an_earlier_turn,
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_resumed_walk_gives_the_input_a_fresh_walk_gives(name: str) -> None:
    earlier, later, resumes = CASES[name]()
    expected = _fresh(later)
    conversation._WALKED.clear()
    turn_conversation(earlier)
    resumed = conversation._WALKED.resume(later.flow_id, tuple(later.messages))
    walked = resumed is not None and later.turn_id not in resumed[1].turn_ids
    assert walked is resumes
    assert turn_conversation(later) == expected
    assert expected.has_images is (name == "images in an earlier turn")


@pytest.mark.parametrize("name", list(CASES))
def test_a_kept_walk_weighs_the_stored_text_of_the_messages_it_walked(name: str) -> None:
    # What bounds the cache's memory: the walked messages' items, parsed from that text.
    earlier, later, _ = CASES[name]()
    conversation._WALKED.clear()
    for turn in (earlier, later):  # a fresh walk, then one that may resume it
        turn_conversation(turn)
        kept = conversation._WALKED.resume(turn.flow_id, tuple(turn.messages))
        assert kept is not None
        walked, state = kept
        assert state.chars == sum(len(m.framework_item) for m in turn.messages[:walked])


def test_the_records_decide_a_result_on_every_call() -> None:
    turns = [("t1", _tool_turn(1)), ("t2", _tool_turn(2)[:2]), ("t3", [user_text_message("q")])]
    turn = _context(_stored(turns), "t3")
    first = turn_conversation(turn)
    later = turn_conversation(
        replace(turn, tool_calls={"c2": _record("c2", "t2", "the output came late")})
    )
    assert "the output came late" not in str(first.items)
    assert "the output came late" in str(later.items)


def _weightless(state: str) -> int:
    return 0


def test_a_prefix_cache_resumes_only_an_equal_prefix() -> None:
    cache: PrefixCache[int, str] = PrefixCache(_weightless, entries=2)
    cache.remember("a", (1, 2, 3), "after 3")
    assert cache.resume("a", (1, 2, 3, 4)) == (3, "after 3")
    assert cache.resume("a", (1, 2, 3)) == (3, "after 3")
    assert cache.resume("a", (1, 2)) is None
    assert cache.resume("a", (1, 9, 3, 4)) is None
    assert cache.resume("b", (1, 2, 3)) is None
    cache.remember("b", (1,), "b")
    cache.remember("c", (1,), "c")
    assert cache.resume("a", (1, 2, 3)) is None, "the least recently used key is dropped"
    assert cache.resume("c", [1, 2]) == (1, "c")


def test_a_prefix_cache_holds_a_bounded_number_of_elements() -> None:
    cache: PrefixCache[int, str] = PrefixCache(
        _weightless, entries=10, most_weight=5, measured=False
    )
    cache.remember("a", (1, 2, 3), "a")
    cache.remember("b", (1, 2), "b")
    assert cache.resume("a", (1, 2, 3)) == (3, "a")
    cache.remember("c", (1,), "c")
    assert cache.resume("b", (1, 2)) is None, "the least recently used went over the bound"
    assert cache.resume("a", (1, 2, 3)) == (3, "a")
    cache.remember("d", tuple(range(6)), "too long")
    assert cache.resume("d", tuple(range(6))) is None
    cache.remember("a", (1, 2, 3, 4), "a again")
    assert cache.resume("a", (1, 2, 3, 4)) == (4, "a again")
    assert cache.resume("c", (1,)) == (1, "c")


def test_a_kept_walk_weighs_what_weigh_says_of_its_state_and_one_for_each_element() -> None:
    cache: PrefixCache[int, str] = PrefixCache(len, entries=10, most_weight=12, measured=False)
    cache.remember("a", (1, 2), "12345")  # 7
    cache.remember("b", (1,), "12")  # 3
    assert cache.resume("a", (1, 2)) == (2, "12345")
    cache.remember("c", (1,), "123")  # 4: 14 in all, over the bound
    assert cache.resume("b", (1,)) is None, "the least recently used went over the bound"
    assert cache.resume("a", (1, 2)) == (2, "12345")
    cache.remember("d", (1, 2, 3), "1234567890")  # 13: heavier than the bound, not kept
    assert cache.resume("d", (1, 2, 3)) is None


def test_by_default_a_process_keeps_the_walks_of_many_sessions() -> None:
    # 30 sessions of 200 turns (800 messages of 250 characters each) and 1,000 short
    # ones: a worker serving them walks each message once, not at every model call.
    cache: PrefixCache[int, int] = PrefixCache(lambda chars: chars)
    long = tuple(range(800))
    for session in range(30):
        cache.remember(f"long-{session}", long, 800 * 250)
    for session in range(1000):
        cache.remember(f"short-{session}", long[:8], 8 * 250)
    assert all(cache.resume(f"long-{session}", long) for session in range(30))
    assert all(cache.resume(f"short-{session}", long[:8]) for session in range(1000))


class _Item:
    """An element compared by identity, as the decoded items and messages of sessions are."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _session(first: _Item, name: str, length: int) -> tuple[_Item, ...]:
    return (first, *(_Item(f"{name}{number}") for number in range(1, length)))


def test_a_key_keeps_the_walks_of_sessions_that_start_with_one_element() -> None:
    first = _Item("hi")
    a, b = _session(first, "a", 6), _session(first, "b", 6)
    shared: PrefixCache[_Item, str] = PrefixCache(_weightless, walks_per_key=2)
    single: PrefixCache[_Item, str] = PrefixCache(_weightless)
    for cache in (shared, single):
        cache.remember("hi", a[:4], "a after 4")
        cache.remember("hi", b[:2], "b after 2")
    assert shared.resume("hi", a[:5]) == (4, "a after 4")
    assert shared.resume("hi", b[:3]) == (2, "b after 2")
    assert shared.resume("hi", b) == (2, "b after 2"), "the longer walk of a is no prefix of b"
    assert shared.resume("hi", (first, _Item("c1"))) is None
    assert single.resume("hi", a[:5]) is None, "one walk a key: b's took a's place"


def test_a_walk_takes_the_place_of_the_walk_it_resumed() -> None:
    first = _Item("hi")
    a, b = _session(first, "a", 6), _session(first, "b", 6)
    cache: PrefixCache[_Item, str] = PrefixCache(_weightless, walks_per_key=2)
    cache.remember("hi", a[:2], "a after 2")
    cache.remember("hi", b[:2], "b after 2")
    for end in (3, 4):
        resumed = cache.resume("hi", a[:end])
        assert resumed == (end - 1, f"a after {end - 1}")
        cache.remember("hi", a[:end], f"a after {end}", replacing=resumed)
    assert cache.resume("hi", a) == (4, "a after 4")
    assert cache.resume("hi", b) == (2, "b after 2"), "a's walks did not push b's out"
    cache.remember("hi", a[:5], "a after 5", replacing=(4, "a after 4"))
    assert cache.resume("hi", b) is None, "an equal answer is not the one resume gave"


def test_a_key_drops_its_oldest_walk_beyond_walks_per_key() -> None:
    first = _Item("hi")
    a, b, c = (_session(first, name, 4) for name in "abc")
    cache: PrefixCache[_Item, str] = PrefixCache(_weightless, walks_per_key=2)
    cache.remember("hi", a, "a")
    cache.remember("hi", b[:3], "b")
    cache.remember("hi", c[:2], "c")
    assert cache.resume("hi", a) is None, "the oldest walk was dropped"
    assert cache.resume("hi", b) == (3, "b")
    assert cache.resume("hi", c) == (2, "c")
    with pytest.raises(ValueError, match="walks_per_key must be at least 1, not 0"):
        PrefixCache(_weightless, walks_per_key=0)


def test_a_keys_walks_weigh_together() -> None:
    first = _Item("hi")
    a, b = _session(first, "a", 3), _session(first, "b", 3)
    cache: PrefixCache[_Item, str] = PrefixCache(
        len, walks_per_key=2, most_weight=10, measured=False
    )
    cache.remember("hi", a, "12")  # 5
    cache.remember("hi", b, "123")  # 6: 11 in all, over the bound, not kept
    assert cache.resume("hi", a) is None
    cache.remember("hi", a, "1")  # 4
    cache.remember("hi", b[:2], "1")  # 3: 7 in all
    assert cache.resume("hi", a) == (3, "1")
    assert cache.resume("hi", b) == (2, "1")


def test_a_prefix_cache_trusts_the_lineage_it_remembered_a_walk_with() -> None:
    cache: PrefixCache[int, str] = PrefixCache(_weightless)
    lineage = object()
    cache.remember("a", (1, 2, 3, 4), "after 2", walked=2, lineage=lineage)
    # The lineage vouches that the sequence starts with the walked one: nothing is compared.
    assert cache.resume("a", (7, 8, 9), lineage=lineage) == (2, "after 2")
    assert cache.resume("a", (7,), lineage=lineage) is None, "shorter than the walk"
    assert cache.resume("a", (7, 8, 9), lineage=object()) is None
    assert cache.resume("a", (1, 2, 9)) == (2, "after 2"), "without it, the walked two compared"
    cache.remember("b", [1, 2, 3], "after 1", walked=1, lineage=lineage)  # a list is copied
    assert cache.resume("b", (1, 5)) == (1, "after 1")


def test_a_walk_over_all_messages_reads_resumes_on_their_lineage() -> None:
    earlier = _history(3)
    state = StoredMessagesState(
        None, (), _stored([*earlier, ("t4", [user_text_message("question 4")])])
    )
    first = all_messages(state)
    turn_conversation(_context(first, "t4", flow_id=state.flow_id))
    # The model asked for a tool and its result is stored: the turn's second model call.
    state.store(*_stored([*earlier, ("t4", _tool_turn(4)[:3])])[len(first) :])
    second = all_messages(state)
    lineage = MESSAGE_LINEAGE.lineage(state.flow_id, second)
    assert lineage is not None
    # The walk was kept with the lineage of the read it walked, which this read continues.
    kept = conversation._WALKED.resume(state.flow_id, second)
    assert kept is not None
    assert conversation._WALKED.resume(state.flow_id, second[::-1], lineage=lineage) == kept
    resumed = turn_conversation(_context(second, "t4", flow_id=state.flow_id))
    copy = (*second,)  # not the read all_messages noted: walked afresh, compared
    assert resumed == _fresh(_context(copy, "t4", flow_id=state.flow_id))


def test_a_prefix_cache_charges_a_walk_the_memory_it_keeps_not_its_weight() -> None:
    # A walk of 3 elements and a 100-character state weighs 103, yet takes about 600
    # bytes (the walk's tuples, the state's header): two such walks pass a bound of
    # 1,000, and one walk alone passes a bound of 500.
    state = "s" * 100
    measured: PrefixCache[str, str] = PrefixCache(len, entries=10, most_weight=1000)
    plain: PrefixCache[str, str] = PrefixCache(len, entries=10, most_weight=1000, measured=False)
    for cache in (measured, plain):
        for key in ("a", "b"):
            cache.remember(key, ("x", "y", key), state)
    assert plain.resume("a", ("x", "y", "a")) == (3, state)
    assert measured.resume("a", ("x", "y", "a")) is None, "two walks passed the bound"
    assert measured.resume("b", ("x", "y", "b")) == (3, state)
    alone: PrefixCache[str, str] = PrefixCache(len, entries=10, most_weight=500)
    alone.remember("a", ("x", "y", "a"), state)
    assert alone.resume("a", ("x", "y", "a")) is None, "one walk takes more than the bound"
