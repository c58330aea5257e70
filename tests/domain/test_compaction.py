"""Compaction: the policy, the stored-input estimate, the cutoffs, and the next summary."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.compaction import (
    CompactionPolicy,
    CompactionTurn,
    estimate_stored_input_tokens,
    is_new_compaction_cutoff,
    model_response_cuts,
    next_context_summary,
    select_model_response_cutoff,
    select_turn_boundary_cutoff,
)
from dex_agents.domain.context_summary import ContextSummary
from dex_agents.domain.context_summary_prompt import (
    CONTEXT_SUMMARY_NOTE_HEADER,
    build_context_summary_note,
)
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.token_estimates import estimate_text_tokens

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
USER, ASSISTANT, TOOL = MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL


@dataclass(frozen=True)
class FakeTurn:
    """A turn as the rules read it; a frozen dataclass like the port's context."""

    messages: tuple[AgentMessage, ...]
    context_summary: ContextSummary | None = None
    framework_run_state: str | None = None


def _m(
    sequence: int,
    turn: int,
    role: MessageRole = USER,
    *,
    tokens: int = 10,
    call: str | None = None,
    **fields: Any,
) -> AgentMessage:
    return AgentMessage(
        sequence=sequence,
        turn_id=f"turn-{turn}",
        role=role,
        framework_item="x" * (3 * tokens),
        tool_call_id=call,
        **fields,
    )


def _summary(last: int, generation: int = 1, text: str = "earlier") -> ContextSummary:
    return ContextSummary(generation=generation, last_sequence=last, text=text, created_at=NOW)


def test_the_fake_turn_is_a_compaction_turn() -> None:
    turn: CompactionTurn = FakeTurn(messages=())
    assert turn.messages == ()


# Policy


def test_policy_defaults_and_replace() -> None:
    policy = CompactionPolicy(context_window_tokens=400_000)
    assert (policy.trigger_ratio, policy.keep_ratio, policy.reserved_input_tokens) == (0.85, 0.3, 0)
    changed = dataclasses.replace(policy, reserved_input_tokens=2_000)
    assert changed.reserved_input_tokens == 2_000
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.trigger_ratio = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        (
            {"context_window_tokens": 0},
            ValueError,
            "context_window_tokens must be at least 1, not 0",
        ),
        ({"context_window_tokens": 1.5}, TypeError, "context_window_tokens must be an int"),
        ({"trigger_ratio": 0}, ValueError, "trigger_ratio must be above 0 and at most 1, not 0"),
        ({"trigger_ratio": 1.01}, ValueError, "trigger_ratio must be above 0 and at most 1"),
        ({"trigger_ratio": float("nan")}, ValueError, "trigger_ratio must be finite"),
        ({"trigger_ratio": "0.8"}, TypeError, "trigger_ratio must be a number"),
        ({"keep_ratio": -0.1}, ValueError, "keep_ratio must be at least 0 and below trigger_ratio"),
        (
            {"keep_ratio": 0.85},
            ValueError,
            r"keep_ratio must be at least 0 and below trigger_ratio \(0.85\)",
        ),
        ({"reserved_input_tokens": -1}, ValueError, "reserved_input_tokens must be at least 0"),
        (
            {"reserved_input_tokens": 100},
            ValueError,
            r"below context_window_tokens \(100\), not 100",
        ),
        ({"reserved_input_tokens": True}, TypeError, "reserved_input_tokens must be an int"),
    ],
)
def test_policy_validation_names_the_field(
    fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        CompactionPolicy(**{"context_window_tokens": 100, **fields})


@pytest.mark.parametrize(
    ("policy", "estimate", "triggered"),
    [
        (CompactionPolicy(context_window_tokens=400_000), 339_999, False),
        (CompactionPolicy(context_window_tokens=400_000), 340_000, True),
        (
            CompactionPolicy(context_window_tokens=400_000, reserved_input_tokens=10_000),
            329_999,
            False,
        ),
        (
            CompactionPolicy(context_window_tokens=400_000, reserved_input_tokens=10_000),
            330_000,
            True,
        ),
        (CompactionPolicy(context_window_tokens=100), 84, False),
        (CompactionPolicy(context_window_tokens=100), 85, True),
        (CompactionPolicy(context_window_tokens=10, trigger_ratio=0.7), 7, True),
        (CompactionPolicy(context_window_tokens=10, trigger_ratio=0.7), 6, False),
        (CompactionPolicy(context_window_tokens=7), 5, False),  # 0.85 * 7 = 5.95
        (CompactionPolicy(context_window_tokens=7), 6, True),
        (CompactionPolicy(context_window_tokens=10, trigger_ratio=1), 10, True),
    ],
)
def test_trigger_at_trigger_ratio_of_the_window(
    policy: CompactionPolicy, estimate: int, triggered: bool
) -> None:
    assert policy.is_triggered(estimate) is triggered


@pytest.mark.parametrize(
    ("window", "keep", "budget"),
    [(400_000, 0.3, 120_000), (100, 0.3, 30), (7, 0.3, 2), (10, 0.3, 3), (1_000, 0.0, 0)],
)
def test_retained_token_budget_is_keep_ratio_of_the_window(
    window: int, keep: float, budget: int
) -> None:
    policy = CompactionPolicy(context_window_tokens=window, keep_ratio=keep)
    assert policy.retained_token_budget == budget


@pytest.mark.parametrize(
    ("cutoff", "summary", "new"),
    [(None, None, False), (3, None, True), (3, _summary(3), False), (4, _summary(3), True)],
)
def test_a_cutoff_must_be_past_the_current_summary(
    cutoff: int | None, summary: ContextSummary | None, new: bool
) -> None:
    assert is_new_compaction_cutoff(cutoff, summary) is new


# Estimates


def test_stored_input_counts_framework_items_the_summary_and_fixed_tokens() -> None:
    messages = (_m(4, 2, tokens=10), _m(5, 2, ASSISTANT, tokens=7, text="ignored text"))
    assert estimate_stored_input_tokens(FakeTurn(messages)) == 17
    assert estimate_stored_input_tokens(FakeTurn(messages), fixed_input_tokens=100) == 117
    summary = _summary(3, text="abc")
    note = f"{CONTEXT_SUMMARY_NOTE_HEADER}\nabc"
    assert build_context_summary_note(summary) == note
    assert estimate_stored_input_tokens(FakeTurn(messages, summary)) == 17 + estimate_text_tokens(
        note
    )
    with pytest.raises(ValueError, match="fixed_input_tokens must be at least 0, not -1"):
        estimate_stored_input_tokens(FakeTurn(messages), fixed_input_tokens=-1)


# Turn boundary cutoff: turn-1 is 1..2, turn-2 is 3..4, the running turn-3 is 5..6.
THREE_TURNS = tuple(
    _m(sequence, turn, role)
    for sequence, turn, role in [
        (1, 1, USER),
        (2, 1, ASSISTANT),
        (3, 2, USER),
        (4, 2, ASSISTANT),
        (5, 3, USER),
        (6, 3, ASSISTANT),
    ]
)


MULTI_CALL = _m(2, 1, ASSISTANT)  # one output item holding calls c1 and c2: it names neither


@pytest.mark.parametrize(
    ("messages", "cuts"),
    [
        pytest.param(
            (
                _m(1, 1, USER),
                MULTI_CALL,
                _m(3, 1, TOOL, call="c1"),
                _m(4, 1, TOOL, call="c2"),
                _m(5, 1, ASSISTANT, text="done"),
                _m(6, 2, USER),
            ),
            (1, 4, 5),
            id="results-stay-with-the-response-that-names-no-call",
        ),
        pytest.param(
            (
                _m(1, 1, USER),
                MULTI_CALL,
                _m(3, 1, TOOL, call="c1"),
                _m(4, 1, USER, text="steer"),
                _m(5, 1, TOOL, call="c2"),
                _m(6, 1, ASSISTANT, text="done"),
            ),
            (1, 5),
            id="a-message-between-the-results-is-kept-with-them",
        ),
        pytest.param(
            (
                _m(3, 1, TOOL, call="c1"),
                _m(4, 1, TOOL, call="c2"),
                _m(5, 1, ASSISTANT, text="done"),
                _m(6, 2, USER),
            ),
            (1, 2, 3),
            id="results-whose-call-retention-deleted",
        ),
        pytest.param(
            (
                _m(1, 1, USER),
                _m(2, 1, ASSISTANT, text="done"),
                _m(3, 2, TOOL, call="c9"),
                _m(4, 2, USER),
            ),
            (1, 2, 3),
            id="an-earlier-turns-response-is-not-the-call",
        ),
    ],
)
def test_a_result_whose_call_no_message_names_stays_with_its_response(
    messages: tuple[AgentMessage, ...], cuts: tuple[int, ...]
) -> None:
    assert model_response_cuts(messages, running_turn_id="turn-2") == cuts


@pytest.mark.parametrize(
    ("turn", "budget", "cutoff"),
    [
        (FakeTurn(THREE_TURNS), 59, 2),  # 40 kept tokens fit: summarize turn-1 only
        (FakeTurn(THREE_TURNS), 40, 2),
        (FakeTurn(THREE_TURNS), 39, 4),
        (FakeTurn(THREE_TURNS), 5, 4),  # never inside the running turn
        (FakeTurn(THREE_TURNS), 60, None),  # all 60 tokens already fit: no new cutoff
        (FakeTurn(THREE_TURNS), 1_000, None),
        (FakeTurn(THREE_TURNS[2:], _summary(2)), 40, None),  # what is left after cutting at 2
        (FakeTurn(THREE_TURNS, framework_run_state="state"), 5, None),
        (FakeTurn(THREE_TURNS[4:]), 5, None),  # only the running turn
        (FakeTurn(THREE_TURNS[2:], _summary(2)), 5, 4),
        (FakeTurn(THREE_TURNS, _summary(2)), 5, 4),  # messages at or before the summary ignored
        (FakeTurn(THREE_TURNS[4:], _summary(4)), 5, None),  # no new cutoff past the summary
        (FakeTurn(()), 5, None),
    ],
)
def test_select_turn_boundary_cutoff(turn: FakeTurn, budget: int, cutoff: int | None) -> None:
    assert select_turn_boundary_cutoff(turn, budget) == cutoff


# Model response cutoff: one running turn with tool calls.
TOOL_TURN = (
    _m(1, 1, USER),
    _m(2, 1, ASSISTANT, text="Let me look."),
    _m(3, 1, ASSISTANT, call="c1", tool_name="lookup"),  # same response as 2
    _m(4, 1, TOOL, call="c1", tool_name="lookup"),
    _m(5, 1, ASSISTANT, call="c2", tool_name="lookup"),
    _m(6, 1, ASSISTANT, call="c3", tool_name="lookup"),  # one response, two calls
    _m(7, 1, TOOL, call="c2", tool_name="lookup"),
    _m(8, 1, TOOL, call="c3", tool_name="lookup"),
    _m(9, 1, ASSISTANT, call="c4", tool_name="lookup"),  # its result is not stored yet
)


def test_model_response_cuts_keep_calls_with_their_results() -> None:
    assert model_response_cuts(TOOL_TURN, running_turn_id="turn-1") == (1, 4, 8)


def test_an_ended_turns_call_without_result_does_not_block_cuts() -> None:
    messages = (
        _m(1, 1, USER),
        _m(2, 1, ASSISTANT, call="c1"),  # turn-1 failed; its result was never stored
        _m(3, 2, USER),
        _m(4, 2, ASSISTANT, call="c1"),  # the same ID in a later turn
        _m(5, 2, TOOL, call="c1"),
        _m(6, 2, ASSISTANT, text="done"),
    )
    assert model_response_cuts(messages, running_turn_id="turn-2") == (1, 2, 3, 5)
    # As the running turn, its open call blocks every later cut.
    assert model_response_cuts(messages[:3], running_turn_id="turn-1") == (1,)


@pytest.mark.parametrize(
    ("turn", "budget", "cutoff"),
    [
        (FakeTurn(TOOL_TURN), 1_000, None),  # all 90 tokens already fit: no new cutoff
        (FakeTurn(TOOL_TURN), 90, None),
        (FakeTurn(TOOL_TURN), 89, 1),
        (FakeTurn(TOOL_TURN), 80, 1),
        (FakeTurn(TOOL_TURN), 79, 4),
        (FakeTurn(TOOL_TURN), 50, 4),
        (FakeTurn(TOOL_TURN), 49, 8),
        (FakeTurn(TOOL_TURN), 0, 8),
        (FakeTurn(TOOL_TURN, framework_run_state="calls=3"), 0, 8),  # mid-turn is fine
        (FakeTurn(TOOL_TURN[4:], _summary(4)), 0, 8),
        (FakeTurn(TOOL_TURN[8:], _summary(8)), 0, None),
        (FakeTurn(TOOL_TURN[:3]), 0, 1),
    ],
)
def test_select_model_response_cutoff(turn: FakeTurn, budget: int, cutoff: int | None) -> None:
    assert select_model_response_cutoff(turn, budget) == cutoff


# A second estimate that is still high finds no new cutoff, so the pair cannot loop.

SELECTORS = [select_turn_boundary_cutoff, select_model_response_cutoff]


def _after_compaction(turn: FakeTurn, cutoff: int) -> FakeTurn:
    """The turn ``RunModel`` sees once ``CompactContext`` stored a summary through ``cutoff``."""
    kept = tuple(message for message in turn.messages if message.sequence > cutoff)
    return FakeTurn(kept, _summary(cutoff), turn.framework_run_state)


@pytest.mark.parametrize(
    ("select", "messages", "budget"),
    [
        (select_turn_boundary_cutoff, THREE_TURNS, 59),  # cuts at 2, keeps 40 of 59
        (select_turn_boundary_cutoff, THREE_TURNS, 39),  # cuts at 4, keeps 20
        (select_turn_boundary_cutoff, THREE_TURNS, 0),  # cuts at 4, the running turn stays
        (select_model_response_cutoff, THREE_TURNS, 59),
        (select_model_response_cutoff, THREE_TURNS, 0),  # cuts at 5, keeps message 6
        (select_model_response_cutoff, TOOL_TURN, 89),  # cuts at 1
        (select_model_response_cutoff, TOOL_TURN, 50),  # cuts at 4
        (select_model_response_cutoff, TOOL_TURN, 0),  # cuts at 8, before the open call
    ],
)
def test_a_second_call_after_compacting_finds_no_new_cutoff(
    select: Callable[[CompactionTurn, int], int | None],
    messages: tuple[AgentMessage, ...],
    budget: int,
) -> None:
    cutoff = select(FakeTurn(messages), budget)
    assert cutoff is not None
    assert select(_after_compaction(FakeTurn(messages), cutoff), budget) is None


_ROLES = st.sampled_from([USER, ASSISTANT, TOOL])


@st.composite
def _transcripts(draw: st.DrawFn) -> tuple[AgentMessage, ...]:
    messages: list[AgentMessage] = []
    turn = 1
    for sequence in range(1, draw(st.integers(0, 14)) + 1):
        turn += draw(st.integers(0, 1))
        role = draw(_ROLES)
        call = draw(st.sampled_from([None, "c1", "c2"])) if role is not USER else None
        messages.append(_m(sequence, turn, role, tokens=draw(st.integers(0, 30)), call=call))
    return tuple(messages)


@settings(max_examples=100, deadline=None)
@given(messages=_transcripts(), budget=st.integers(0, 200), select=st.sampled_from(SELECTORS))
def test_compacting_at_a_cutoff_never_asks_to_compact_again(
    messages: tuple[AgentMessage, ...],
    budget: int,
    select: Callable[[CompactionTurn, int], int | None],
) -> None:
    cutoff = select(FakeTurn(messages), budget)
    if cutoff is None:
        return
    assert select(_after_compaction(FakeTurn(messages), cutoff), budget) is None


# The next summary


def test_next_context_summary() -> None:
    first = next_context_summary(None, last_sequence=40, text="Orders.", now=NOW)
    assert first == ContextSummary(
        generation=1, first_sequence=1, last_sequence=40, text="Orders.", created_at=NOW
    )
    second = next_context_summary(first, last_sequence=90, text="More orders.", now=NOW)
    assert (second.generation, second.first_sequence, second.last_sequence) == (2, 1, 90)


@pytest.mark.parametrize(
    ("previous", "last", "text", "message"),
    [
        (None, 0, "x", "last_sequence must be past 0, not 0"),
        (_summary(40), 40, "x", "last_sequence must be past 40, not 40"),
        (None, 5, "  ", "non-blank text"),
    ],
)
def test_next_context_summary_refuses(
    previous: ContextSummary | None, last: int, text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        next_context_summary(previous, last_sequence=last, text=text, now=NOW)
