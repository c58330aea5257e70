"""Interrupt IDs of a tool's own questions: ``<tool_call_id>-input-<n>``, unique in the turn."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.interrupts import (
    AgentInterrupt,
    InterruptKind,
    answerable_interrupts,
    input_interrupt_id_taken,
    tool_input_interrupt_id,
    without_interrupt,
)

NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("tool_call_id", "n", "interrupt_id"),
    [
        ("call_1", 1, "call_1-input-1"),
        ("call_1", 2, "call_1-input-2"),
        ("toolu_01A", 10, "toolu_01A-input-10"),
        ("c-input-1", 1, "c-input-1-input-1"),
    ],
)
def test_tool_input_interrupt_id(tool_call_id: str, n: int, interrupt_id: str) -> None:
    assert tool_input_interrupt_id(tool_call_id, n) == interrupt_id


@pytest.mark.parametrize(
    ("tool_call_id", "n", "message"),
    [
        ("call_1", 0, "n must be an int of at least 1, not 0"),
        ("call_1", -1, "n must be an int of at least 1, not -1"),
        ("call_1", True, "n must be an int of at least 1, not True"),
        ("", 1, "tool_call_id must not be empty"),
    ],
)
def test_tool_input_interrupt_id_refuses(tool_call_id: str, n: int, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        tool_input_interrupt_id(tool_call_id, n)


@pytest.mark.parametrize(
    ("record_ids", "pending_ids", "taken"),
    [
        ({"a", "b"}, set(), False),
        ({"a", "a-input-1"}, set(), True),  # another call's tool call ID is the question's ID
        ({"a"}, {"a-input-1"}, True),  # a pending interrupt already uses it
        ({"a"}, {"a", "b-input-1"}, False),  # an approval of call a uses a's own ID
        (set(), set(), False),
    ],
)
def test_input_interrupt_id_taken(record_ids: set[str], pending_ids: set[str], taken: bool) -> None:
    interrupt_id = tool_input_interrupt_id("a", 1)
    assert input_interrupt_id_taken(interrupt_id, record_ids, pending_ids) is taken
    assert input_interrupt_id_taken(interrupt_id, list(record_ids), tuple(pending_ids)) is taken


@settings(max_examples=100, deadline=None)
@given(
    tool_call_id=st.text(min_size=1, max_size=20),
    n=st.integers(1, 1_000),
    others=st.sets(st.text(max_size=30), max_size=5),
)
def test_an_id_is_taken_exactly_when_a_record_or_pending_interrupt_uses_it(
    tool_call_id: str, n: int, others: set[str]
) -> None:
    interrupt_id = tool_input_interrupt_id(tool_call_id, n)
    assert interrupt_id.startswith(tool_call_id)
    assert interrupt_id != tool_call_id  # a call's question never reuses its own approval's ID
    assert input_interrupt_id_taken(interrupt_id, others, ()) is (interrupt_id in others)
    assert input_interrupt_id_taken(interrupt_id, (), others) is (interrupt_id in others)
    assert input_interrupt_id_taken(interrupt_id, (), ()) is False


def test_without_interrupt_drops_only_the_resolved_one() -> None:
    def interrupt(interrupt_id: str) -> AgentInterrupt:
        return AgentInterrupt(
            interrupt_id=interrupt_id,
            tool_call_id=interrupt_id,
            tool_name="refund",
            kind=InterruptKind.APPROVAL,
            turn_id="turn-1",
        )

    pending = (interrupt("a"), interrupt("b"), interrupt("c"))
    assert [i.interrupt_id for i in without_interrupt(pending, "b")] == ["a", "c"]
    assert without_interrupt(pending, "missing") == pending


def test_answerable_interrupts_leave_out_only_the_cancelled_turns() -> None:
    def interrupt(interrupt_id: str, turn_id: str) -> AgentInterrupt:
        return AgentInterrupt(
            interrupt_id=interrupt_id,
            tool_call_id=interrupt_id,
            tool_name="refund",
            kind=InterruptKind.APPROVAL,
            turn_id=turn_id,
        )

    pending = (interrupt("a", "turn-2"), interrupt("b", "turn-1"), interrupt("c", "turn-2"))
    assert answerable_interrupts(pending, None, now=NOW) == pending
    assert answerable_interrupts(pending, "turn-3", now=NOW) == pending
    assert [i.interrupt_id for i in answerable_interrupts(pending, "turn-2", now=NOW)] == ["b"]


def test_answerable_interrupts_leave_out_those_past_their_deadline() -> None:
    def interrupt(interrupt_id: str, deadline: datetime | None) -> AgentInterrupt:
        return AgentInterrupt(
            interrupt_id=interrupt_id,
            tool_call_id=interrupt_id,
            tool_name="refund",
            kind=InterruptKind.APPROVAL,
            turn_id="turn-1",
            deadline=deadline,
        )

    pending = (
        interrupt("a", None),
        interrupt("b", NOW),
        interrupt("c", NOW + timedelta(microseconds=1)),
        interrupt("d", NOW - timedelta(hours=1)),
    )
    assert [i.interrupt_id for i in answerable_interrupts(pending, None, now=NOW)] == ["a", "c"]
