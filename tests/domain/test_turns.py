"""Turn IDs, idempotency keys, tool call IDs, model call limits, and ending or continuing a turn."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.turns import (
    DEFAULT_MAX_MODEL_CALLS_PER_TURN,
    MAX_CONSECUTIVE_TURN_CONTINUATIONS,
    TURN_CONTINUATION_LIMIT_ERROR,
    ContinueTurn,
    InvalidToolCallIdError,
    InvalidTurnContinuationError,
    TurnContinuationAction,
    TurnContinuationDecision,
    check_turn_continuation,
    decide_continuation,
    idempotency_key,
    model_call_limit_result,
    model_call_offers_tools,
    parse_turn_number,
    turn_id,
    validate_tool_call_id,
    validate_tool_call_ids,
)

# --- turn IDs ---------------------------------------------------------------


@pytest.mark.parametrize(("number", "text"), [(1, "turn-1"), (12, "turn-12"), (100, "turn-100")])
def test_turn_ids(number: int, text: str) -> None:
    assert turn_id(number) == text
    assert parse_turn_number(text) == number


@settings(max_examples=100, deadline=None)
@given(number=st.integers(min_value=1, max_value=10**12))
def test_parse_turn_number_inverts_turn_id(number: int) -> None:
    assert parse_turn_number(turn_id(number)) == number


@pytest.mark.parametrize("number", [0, -1, True, 1.0, "1"])
def test_a_turn_number_is_an_int_from_one(number: Any) -> None:
    with pytest.raises(ValueError, match=r"a turn number is an int from 1, not "):
        turn_id(number)


@pytest.mark.parametrize(
    "text", ["turn-0", "turn-01", "turn-", "turn-x", "Turn-1", "turn-1 ", "turn--1", "1", ""]
)
def test_parse_turn_number_refuses_other_text(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a turn ID of the form 'turn-<n>'"):
        parse_turn_number(text)


# --- tool call IDs and idempotency keys -------------------------------------


def test_the_idempotency_key() -> None:
    assert idempotency_key("session-42", "turn-3", "call_abc") == "session-42/turn-3/call_abc"


@pytest.mark.parametrize(
    ("tool_call_id", "message"),
    [
        ("", "invalid tool call ID '': a tool call ID must not be empty"),
        (" \t", "invalid tool call ID ' \\t': a tool call ID must not be blank"),
        ("a/b", "invalid tool call ID 'a/b': a tool call ID must not contain '/'"),
        (
            "ab\udc80",
            "invalid tool call ID 'ab\\udc80': a tool call ID must be valid Unicode text: "
            "it has a lone surrogate U+DC80 at index 2",
        ),
        (7, "invalid tool call ID 7: a tool call ID is a string, not int"),
    ],
)
def test_invalid_tool_call_ids_are_refused(tool_call_id: Any, message: str) -> None:
    with pytest.raises(InvalidToolCallIdError) as raised:
        validate_tool_call_id(tool_call_id)
    assert str(raised.value) == message
    assert raised.value.tool_call_id == tool_call_id
    with pytest.raises(InvalidToolCallIdError):
        idempotency_key("session-42", "turn-1", tool_call_id)
    with pytest.raises(InvalidToolCallIdError):
        validate_tool_call_ids(["ok", tool_call_id])


def test_invalid_tool_call_id_error_is_a_value_error_of_the_library() -> None:
    assert issubclass(InvalidToolCallIdError, ValueError)
    assert issubclass(InvalidToolCallIdError, DexAgentsError)


def test_a_tool_call_id_repeated_within_a_response_is_refused() -> None:
    with pytest.raises(InvalidToolCallIdError) as raised:
        validate_tool_call_ids(["a", "b", "a"])
    assert str(raised.value) == (
        "invalid tool call ID 'a': the turn already has a tool call with it"
    )


def test_a_tool_call_id_of_an_earlier_response_of_the_turn_is_refused() -> None:
    with pytest.raises(InvalidToolCallIdError, match="'b'"):
        validate_tool_call_ids(["c", "b"], existing_ids=["a", "b"])


def test_valid_tool_call_ids_come_back_in_order() -> None:
    assert validate_tool_call_ids(iter(["c", "a", "b"]), existing_ids={"x"}) == ("c", "a", "b")
    assert validate_tool_call_ids([]) == ()


@pytest.mark.parametrize(("flow_id", "turn"), [("", "turn-1"), ("s", "")])
def test_an_idempotency_key_needs_a_flow_and_turn_id(flow_id: str, turn: str) -> None:
    with pytest.raises(ValueError, match="needs a non-empty"):
        idempotency_key(flow_id, turn, "call-1")


# --- model call limit -------------------------------------------------------


def test_the_model_call_limit() -> None:
    assert DEFAULT_MAX_MODEL_CALLS_PER_TURN == 100
    assert model_call_limit_result(100) == (
        "The tool call was not run: this turn reached its limit of 100 model calls."
    )
    assert model_call_limit_result(3) == (
        "The tool call was not run: this turn reached its limit of 3 model calls."
    )


@pytest.mark.parametrize(
    ("made", "limit", "offers"),
    [(0, 100, True), (99, 100, True), (100, 100, False), (101, 100, False), (0, 1, True)],
)
def test_after_the_limit_the_next_model_call_offers_no_tools(
    made: int, limit: int, offers: bool
) -> None:
    assert model_call_offers_tools(made, limit) is offers


@pytest.mark.parametrize("limit", [0, -1, True, 2.5])
def test_the_limit_is_an_int_from_one(limit: Any) -> None:
    with pytest.raises(ValueError, match="max_model_calls_per_turn must be an int from 1"):
        model_call_limit_result(limit)
    with pytest.raises(ValueError, match="max_model_calls_per_turn must be an int from 1"):
        model_call_offers_tools(0, limit)


@pytest.mark.parametrize("made", [-1, True, 1.0])
def test_model_calls_made_is_a_non_negative_int(made: Any) -> None:
    with pytest.raises(ValueError, match="model_calls_made must"):
        model_call_offers_tools(made, 10)


# --- ending or continuing a turn --------------------------------------------


def test_the_continuation_limit() -> None:
    assert MAX_CONSECUTIVE_TURN_CONTINUATIONS == 8
    assert TURN_CONTINUATION_LIMIT_ERROR == (
        "the turn ended: decide_turn_continuation continued it 8 times in a row after "
        "answers without tools, the limit (MAX_CONSECUTIVE_TURN_CONTINUATIONS)"
    )


END = TurnContinuationAction.END_TURN
CALL = TurnContinuationAction.CALL_MODEL_WITH_TOOL_RESULTS
CONTINUE = TurnContinuationAction.CONTINUE_WITH_MESSAGE
LIMIT = TurnContinuationAction.LIMIT_REACHED


@pytest.mark.parametrize(
    ("called_tools", "decision", "count", "expected"),
    [
        pytest.param(
            True,
            "end",
            3,
            TurnContinuationDecision(action=END, consecutive_continuations=0),
            id="tools, end: the turn completes without another model call",
        ),
        pytest.param(
            True,
            ContinueTurn("Check the totals."),
            3,
            TurnContinuationDecision(
                action=CONTINUE, consecutive_continuations=0, message="Check the totals."
            ),
            id="tools, ContinueTurn: the message follows the tool results",
        ),
        pytest.param(
            True,
            "default",
            3,
            TurnContinuationDecision(action=CALL, consecutive_continuations=0),
            id="tools, default: the model is called with the tool results",
        ),
        pytest.param(
            False,
            "end",
            3,
            TurnContinuationDecision(action=END, consecutive_continuations=3),
            id="answer, end: the turn completes",
        ),
        pytest.param(
            False,
            ContinueTurn("Finish with DECISION:."),
            3,
            TurnContinuationDecision(
                action=CONTINUE, consecutive_continuations=4, message="Finish with DECISION:."
            ),
            id="answer, ContinueTurn: the model is called again",
        ),
        pytest.param(
            False,
            "default",
            3,
            TurnContinuationDecision(action=END, consecutive_continuations=3),
            id="answer, default: the turn completes",
        ),
        pytest.param(
            True,
            ContinueTurn("go on"),
            8,
            TurnContinuationDecision(action=CONTINUE, consecutive_continuations=0, message="go on"),
            id="tools reset the count even at the limit",
        ),
        pytest.param(
            False,
            ContinueTurn("go on"),
            7,
            TurnContinuationDecision(action=CONTINUE, consecutive_continuations=8, message="go on"),
            id="answer, the 8th continuation in a row",
        ),
        pytest.param(
            False,
            ContinueTurn("go on"),
            8,
            TurnContinuationDecision(
                action=LIMIT, consecutive_continuations=8, turn_error=TURN_CONTINUATION_LIMIT_ERROR
            ),
            id="answer, the 9th continuation in a row reaches the limit",
        ),
        pytest.param(
            False,
            "end",
            8,
            TurnContinuationDecision(action=END, consecutive_continuations=8),
            id="answer, end at the limit just ends",
        ),
    ],
)
def test_the_continuation_table(
    called_tools: bool, decision: Any, count: int, expected: TurnContinuationDecision
) -> None:
    assert decide_continuation(called_tools, decision, count) == expected


def test_eight_continuations_in_a_row_then_the_ninth_reaches_the_limit() -> None:
    count = 0
    actions = []
    for _ in range(MAX_CONSECUTIVE_TURN_CONTINUATIONS + 1):
        decided = decide_continuation(False, ContinueTurn("again"), count)
        actions.append(decided.action)
        count = decided.consecutive_continuations
    assert actions == [CONTINUE] * 8 + [LIMIT]


def test_a_tool_call_resets_the_count() -> None:
    count = 0
    for _ in range(8):
        count = decide_continuation(False, ContinueTurn("again"), count).consecutive_continuations
    count = decide_continuation(True, "default", count).consecutive_continuations
    assert count == 0
    assert decide_continuation(False, ContinueTurn("again"), count).action is CONTINUE


@settings(max_examples=100, deadline=None)
@given(
    called_tools=st.booleans(),
    decision=st.one_of(
        st.sampled_from(["end", "default"]),
        st.text(min_size=1).filter(str.strip).map(ContinueTurn),
    ),
    count=st.integers(min_value=0, max_value=20),
)
def test_continuation_properties(called_tools: bool, decision: Any, count: int) -> None:
    decided = decide_continuation(called_tools, decision, count)
    if called_tools:
        assert decided.consecutive_continuations == 0
        assert decided.action is not LIMIT
    else:
        assert decided.action is not CALL
    assert (decided.action is CONTINUE) == (decided.message is not None)
    assert (decided.action is LIMIT) == (decided.turn_error == TURN_CONTINUATION_LIMIT_ERROR)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("stop", "decide_turn_continuation returned 'stop'; expected 'end', 'default', or "),
        ("END", "returned 'END'"),
        (None, "returned None"),
        (True, "returned True"),
        (ContinueTurn(""), "returned a ContinueTurn with a blank message"),
        (ContinueTurn(" \n\t"), "returned a ContinueTurn with a blank message"),
        (ContinueTurn(5), "returned a ContinueTurn whose message is int, not a string"),  # type: ignore[arg-type]
    ],
)
@pytest.mark.parametrize("called_tools", [True, False])
def test_an_invalid_decision_fails_the_attempt(
    value: object, message: str, called_tools: bool
) -> None:
    with pytest.raises(InvalidTurnContinuationError, match=message):
        decide_continuation(called_tools, value, 0)


@pytest.mark.parametrize("value", ["end", "default", ContinueTurn("more"), ContinueTurn(" more ")])
def test_check_turn_continuation_accepts_the_three_forms(value: object) -> None:
    assert check_turn_continuation(value) == value


@pytest.mark.parametrize(("called_tools", "count"), [(1, 0), (True, -1), (True, False)])
def test_decide_continuation_refuses_bad_arguments(called_tools: Any, count: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="must be"):
        decide_continuation(called_tools, "default", count)


def test_continue_turn_is_positional_and_accepts_a_blank_message() -> None:
    assert ContinueTurn("x").message == "x"
    assert ContinueTurn("").message == ""
