"""The runner contract's values: the spec's call forms, their wire form, and their rules."""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.model_io import (
    ModelOutputItem,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ModelToolChoice,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.runner_outcome_checks import (
    check_agent_turn_outcome,
    check_deferred_tool_outcome,
    check_tool_calls_requested,
    check_tool_task_poll_outcome,
    check_user_message,
)
from dex_agents.domain.runner_outcomes import (
    MAX_TASK_POLL_SECONDS,
    MIN_TASK_POLL_SECONDS,
    AgentTurnOutcome,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolOutcome,
    ModelCallMetadata,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    TurnCompleted,
    TurnContinued,
    task_poll_seconds,
)
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_step_options import ToolCallRetryPolicy, ToolCallStepOptions
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.wire import from_json, to_json, to_wire

IMAGE = AgentImageReference(
    uri="s3://agent-media/sessions/sha256/9f2c",
    mime_type="image/png",
    sha256="9f2c",
    size_bytes=48213,
)
USAGE = AgentUsage(model_calls=1, input_tokens=10, output_tokens=2)
READ = ToolPolicy(ToolEffect.READ)
ANSWER = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="{}", text="Done.")


def exact(message: str) -> str:
    """A ``match`` pattern for exactly this error text."""
    return "^" + re.escape(message) + "$"


def call(tool_call_id: str, tool_name: str = "lookup_order") -> DeferredToolCall:
    return DeferredToolCall(tool_call_id, tool_name, '{"order_id":"7"}', READ)


# --- The spec's call forms ----------------------------------------------------------


def test_a_tool_result_takes_its_output_positionally() -> None:
    result = ToolExecutionResult("Took a screenshot.")
    assert result.output == "Took a screenshot."
    assert result.images == ()


def test_a_tool_result_takes_output_and_images_by_keyword_or_position() -> None:
    by_keyword = ToolExecutionResult(output="Took a screenshot.", images=[IMAGE])
    assert by_keyword.images == (IMAGE,)
    assert ToolExecutionResult("Took a screenshot.", [IMAGE]) == by_keyword


def test_a_deferred_call_takes_the_four_spec_fields_positionally() -> None:
    deferred = DeferredToolCall("call-1", "lookup_order", '{"order_id":"7"}', READ)
    assert deferred == DeferredToolCall(
        tool_call_id="call-1", tool_name="lookup_order", arguments='{"order_id":"7"}', policy=READ
    )
    assert deferred.tool_source_reference is None
    assert deferred.ordered is False
    assert deferred.runner_tool_state is None


def test_the_turn_outcomes_take_the_spec_fields_positionally() -> None:
    requested = ToolCallsRequested("state", [call("call-1")], USAGE)
    assert requested.tool_calls == (call("call-1"),)
    assert requested.new_messages == ()
    assert requested.model_call_metadata is None
    completed = TurnCompleted([ANSWER], USAGE)
    assert completed.new_messages == (ANSWER,)
    assert completed.turn_error is None
    assert completed.model_call_metadata is None
    continued = TurnContinued("state", [ANSWER], USAGE)
    assert continued.new_messages == (ANSWER,)


def test_the_outcomes_keep_their_optional_fields_keyword_only() -> None:
    with pytest.raises(TypeError):
        TurnCompleted([ANSWER], USAGE, None, "limit reached")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        DeferredToolCall("call-1", "t", "{}", READ, "reference")  # type: ignore[call-arg]


def test_tool_task_values_have_the_spec_defaults() -> None:
    assert ToolTaskStarted(task_id="job-1", poll_interval_seconds=5) == ToolTaskStarted("job-1", 5)
    pending = ToolTaskPending(poll_interval_seconds=10)
    assert pending.continuation is None
    question = ToolInputRequested("Which account?")
    assert question.choices == ()
    assert question.allows_free_text is True
    assert question.continuation is None
    assert ToolInputRequested("Which?", ["a", "b"], False, "q-1").choices == ("a", "b")


def test_model_call_metadata_is_all_optional() -> None:
    empty = ModelCallMetadata()
    assert (
        empty.request_model,
        empty.response_model,
        empty.provider_name,
        empty.response_id,
        empty.finish_reasons,
    ) == (None, None, None, None, None)
    full = ModelCallMetadata("gpt-5-mini", "gpt-5-mini-2026", "openai", "resp_1", ["stop"])
    assert full.finish_reasons == ("stop",)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ModelCallMetadata(finish_reasons="stop"),
            "expected a sequence of strings, not the string 'stop'",
        ),
        (
            lambda: ToolInputRequested("Which?", choices="ab"),
            "expected a sequence of strings, not the string 'ab'",
        ),
    ],
    ids=["finish_reasons", "choices"],
)
def test_a_bare_string_is_not_a_sequence_of_strings(build: Any, message: str) -> None:
    with pytest.raises(TypeError, match=exact(message)):
        build()


def test_the_outcome_aliases_are_the_spec_unions() -> None:
    assert isinstance(TurnContinued("s", (), USAGE), AgentTurnOutcome)
    assert isinstance(ToolTaskStarted("job", 5), DeferredToolOutcome)
    assert isinstance(ToolInputRequested("q"), DeferredToolOutcome)
    assert isinstance(ToolTaskPending(5), ToolTaskPollOutcome)
    assert not isinstance(ToolTaskPending(5), DeferredToolOutcome)
    assert not isinstance(ToolTaskStarted("job", 5), ToolTaskPollOutcome)


# --- Wire form -------------------------------------------------------------------------


def test_a_deferred_call_has_a_snake_case_wire_form_with_its_policy() -> None:
    deferred = DeferredToolCall(
        "call-1",
        "refund_order",
        "{}",
        ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True),
        tool_source_reference='{"server":"files"}',
        ordered=True,
    )
    assert to_wire(deferred) == {
        "tool_call_id": "call-1",
        "tool_name": "refund_order",
        "arguments": "{}",
        "policy": {"effect": "non_idempotent_write", "requires_approval": True},
        "tool_source_reference": '{"server":"files"}',
        "ordered": True,
        "runner_tool_state": None,
    }
    assert from_json(to_json(deferred), DeferredToolCall) == deferred


def test_a_tool_result_with_images_round_trips() -> None:
    result = ToolExecutionResult("Took a screenshot.", [IMAGE])
    text = to_json(result)
    assert json.loads(text)["images"][0]["type"] == "image"
    assert from_json(text, ToolExecutionResult) == result


def test_a_summary_result_round_trips_with_its_metadata() -> None:
    result = ContextSummaryResult(
        text="The user asked about order 7.",
        usage=USAGE,
        model_call_metadata=ModelCallMetadata(request_model="gpt-5-mini"),
    )
    assert from_json(to_json(result), ContextSummaryResult) == result


# --- Rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "recorded", "message"),
    [
        (
            ToolCallsRequested("", [call("call-1")], USAGE),
            (),
            "ToolCallsRequested.framework_run_state must be non-empty",
        ),
        (
            ToolCallsRequested("state", [], USAGE),
            (),
            "ToolCallsRequested.tool_calls must hold at least one tool call",
        ),
        (
            ToolCallsRequested("state", [call("")], USAGE),
            (),
            "invalid tool call ID '': a tool call ID must not be empty",
        ),
        (
            ToolCallsRequested("state", [call("a/b")], USAGE),
            (),
            "invalid tool call ID 'a/b': a tool call ID must not contain '/'",
        ),
        (
            ToolCallsRequested("state", [call("call-1"), call("call-1", "other")], USAGE),
            (),
            "invalid tool call ID 'call-1': the turn already has a tool call with it",
        ),
        (
            ToolCallsRequested("state", [call("call-2")], USAGE),
            ("call-1", "call-2"),
            "invalid tool call ID 'call-2': the turn already has a tool call with it",
        ),
    ],
    ids=["empty-run-state", "no-calls", "empty-id", "slash", "repeat", "repeat-recorded"],
)
def test_tool_calls_requested_refuses_what_breaks_the_contract(
    outcome: ToolCallsRequested, recorded: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=exact(message)):
        check_tool_calls_requested(outcome, recorded_tool_call_ids=recorded)


def test_tool_calls_requested_accepts_ids_an_earlier_turn_used() -> None:
    outcome = ToolCallsRequested("state", [call("call-1"), call("call-2")], USAGE)
    check_tool_calls_requested(outcome, recorded_tool_call_ids=("call-3",))
    assert check_agent_turn_outcome(outcome) is outcome


@pytest.mark.parametrize(
    ("outcome", "error", "message"),
    [
        (
            "text",
            TypeError,
            "run_model_step must return TurnCompleted, ToolCallsRequested or TurnContinued, not str",
        ),
        (
            TurnContinued("", (), USAGE),
            ValueError,
            "TurnContinued.framework_run_state must be non-empty",
        ),
        (
            TurnCompleted((), USAGE, turn_error="  "),
            ValueError,
            "TurnCompleted.turn_error must be None or non-blank text",
        ),
        (
            TurnCompleted((), None),  # type: ignore[arg-type]
            TypeError,
            "TurnCompleted.usage must be an AgentUsage, not NoneType",
        ),
        (
            # Stored as 12.0, which no longer decodes as an AgentUsage.
            TurnContinued("state", (), AgentUsage(model_calls=1, input_tokens=12.0)),  # type: ignore[arg-type]
            TypeError,
            "TurnContinued.usage.input_tokens must be an int, not float",
        ),
        (
            ToolCallsRequested("state", [call("call-1")], AgentUsage(model_calls=True)),
            TypeError,
            "ToolCallsRequested.usage.model_calls must be an int, not bool",
        ),
        (
            TurnCompleted((), AgentUsage(output_tokens=None)),  # type: ignore[arg-type]
            TypeError,
            "TurnCompleted.usage.output_tokens must be an int, not NoneType",
        ),
    ],
    ids=[
        "not-an-outcome",
        "continued-without-state",
        "blank-turn-error",
        "no-usage",
        "float-count",
        "bool-count",
        "missing-count",
    ],
)
def test_a_turn_outcome_is_checked_by_its_type(
    outcome: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=exact(message)):
        check_agent_turn_outcome(outcome)


def wrongly_typed_call(**fields: Any) -> DeferredToolCall:
    return attrs.evolve(call("call-1"), **fields)


def wrongly_typed_answer(**fields: Any) -> FrameworkMessage:
    return attrs.evolve(ANSWER, **fields)


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        (
            ToolCallsRequested("state", [wrongly_typed_call(arguments={"order_id": "7"})], USAGE),
            "DeferredToolCall: arguments must be JSON text (a str), not dict ({'order_id': '7'})",
        ),
        (
            ToolCallsRequested("state", [wrongly_typed_call(tool_name=5)], USAGE),
            "DeferredToolCall: tool_name must be a str, not int (5)",
        ),
        (
            ToolCallsRequested("state", [wrongly_typed_call(policy="read")], USAGE),
            "DeferredToolCall: policy must be a ToolPolicy, not str ('read')",
        ),
        (
            ToolCallsRequested("state", [wrongly_typed_call(runner_tool_state=1)], USAGE),
            "DeferredToolCall: runner_tool_state must be a str or None, not int (1)",
        ),
        (
            ToolCallsRequested({"turn": 1}, [call("call-1")], USAGE),  # type: ignore[arg-type]
            "ToolCallsRequested: framework_run_state must be a str, not dict ({'turn': 1})",
        ),
        (
            ToolCallsRequested("state", ["lookup_order"], USAGE),  # type: ignore[list-item]
            "ToolCallsRequested: tool_calls must be DeferredToolCall values, not str "
            "('lookup_order')",
        ),
        (
            TurnCompleted([wrongly_typed_answer(framework_item={"a": 1})], USAGE),
            "FrameworkMessage: framework_item must be a str, not dict ({'a': 1})",
        ),
        (
            TurnContinued("state", [wrongly_typed_answer(tool_output=3)], USAGE),
            "FrameworkMessage: tool_output must be a str or None, not int (3)",
        ),
        (
            TurnCompleted(["Done."], USAGE),  # type: ignore[list-item]
            "TurnCompleted: new_messages must be FrameworkMessage values, not str ('Done.')",
        ),
        (
            TurnCompleted([ANSWER], USAGE, turn_error=500),  # type: ignore[arg-type]
            "TurnCompleted: turn_error must be a str or None, not int (500)",
        ),
    ],
)
def test_a_turn_outcome_field_of_the_wrong_type_is_refused_before_it_is_stored(
    outcome: object, message: str
) -> None:
    # RunModel stores these values as they are, and a value with a field of the wrong
    # type does not decode: before, every later read of the session failed.
    with pytest.raises(TypeError, match=exact(message)):
        check_agent_turn_outcome(outcome)


@pytest.mark.parametrize(
    "outcome",
    [
        TurnCompleted([ANSWER], USAGE),
        TurnCompleted([ANSWER], USAGE, turn_error="limit of 100 model calls reached"),
        TurnContinued("state", [ANSWER], USAGE),
    ],
)
def test_valid_turn_outcomes_pass(outcome: AgentTurnOutcome) -> None:
    assert check_agent_turn_outcome(outcome) is outcome


@pytest.mark.parametrize(
    ("outcome", "error", "message"),
    [
        (
            None,
            TypeError,
            "execute_deferred_tool_call must return ToolExecutionResult, ToolInputRequested or ToolTaskStarted, not NoneType",
        ),
        (
            ToolTaskPending(5),
            TypeError,
            "execute_deferred_tool_call must return ToolExecutionResult, ToolInputRequested or ToolTaskStarted, not ToolTaskPending",
        ),
        (ToolTaskStarted("", 5), ValueError, "ToolTaskStarted.task_id must be non-empty"),
        (
            ToolTaskStarted("job", math.nan),
            ValueError,
            "poll_interval_seconds must be a number, not NaN",
        ),
        (ToolInputRequested(" "), ValueError, "ToolInputRequested.question must be non-blank"),
        (
            ToolInputRequested("Which?", allows_free_text=False),
            ValueError,
            "ToolInputRequested without free text needs at least one choice",
        ),
        (
            ToolInputRequested("Which?", choices=(" ", "\t"), allows_free_text=False),
            ValueError,
            "ToolInputRequested without free text needs a non-blank choice: every choice is blank",
        ),
    ],
    ids=[
        "none",
        "pending",
        "no-task-id",
        "nan-interval",
        "blank-question",
        "unanswerable",
        "only-blank-choices",
    ],
)
def test_a_deferred_tool_outcome_is_checked(
    outcome: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=exact(message)):
        check_deferred_tool_outcome(outcome)


@pytest.mark.parametrize(
    ("outcome", "error", "message"),
    [
        (
            ToolTaskStarted("job", 5),
            TypeError,
            "poll_tool_task must return ToolExecutionResult, ToolTaskPending or ToolInputRequested, not ToolTaskStarted",
        ),
        (ToolTaskPending(math.nan), ValueError, "poll_interval_seconds must be a number, not NaN"),
        (
            ToolInputRequested("Which?", allows_free_text=False),
            ValueError,
            "ToolInputRequested without free text needs at least one choice",
        ),
        (
            ToolInputRequested("Which?", choices=("",), allows_free_text=False),
            ValueError,
            "ToolInputRequested without free text needs a non-blank choice: every choice is blank",
        ),
        (
            ToolExecutionResult("cut", truncated_output_bytes="9000"),  # type: ignore[arg-type]
            TypeError,
            "ToolExecutionResult: truncated_output_bytes must be an int or None, not str ('9000')",
        ),
        (
            ToolExecutionResult("cut", truncated_output_bytes=True),
            TypeError,
            "ToolExecutionResult: truncated_output_bytes must be an int or None, not bool (True)",
        ),
        (
            ToolExecutionResult("cut", truncated_output_bytes=-1),
            ValueError,
            "ToolExecutionResult.truncated_output_bytes must be None or at least 0, not -1",
        ),
    ],
    ids=[
        "started",
        "nan-interval",
        "unanswerable",
        "only-blank-choices",
        "str-size",
        "bool-size",
        "negative-size",
    ],
)
def test_a_poll_outcome_is_checked(outcome: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=exact(message)):
        check_tool_task_poll_outcome(outcome)


@pytest.mark.parametrize(
    "outcome",
    [
        ToolExecutionResult("done"),
        ToolTaskPending(10, continuation="q-1"),
        ToolInputRequested("Which account?", ["ops", "billing"], False, "q-1"),
    ],
)
def test_valid_poll_outcomes_pass(outcome: ToolTaskPollOutcome) -> None:
    assert check_tool_task_poll_outcome(outcome) is outcome


WRONGLY_TYPED_ANSWERS: list[tuple[object, str]] = [
    (ToolExecutionResult(5), "ToolExecutionResult: output must be a str, not int (5)"),  # type: ignore[arg-type]
    (ToolInputRequested(5), "ToolInputRequested: question must be a str, not int (5)"),  # type: ignore[arg-type]
    (
        ToolInputRequested("Which?", ("a", 1)),  # type: ignore[arg-type]
        "ToolInputRequested: choices must be str values, not int (1)",
    ),
    (
        ToolInputRequested("Which?", ("a",), "no"),  # type: ignore[arg-type]
        "ToolInputRequested: allows_free_text must be a bool, not str ('no')",
    ),
    (
        ToolInputRequested("Which?", continuation=7),  # type: ignore[arg-type]
        "ToolInputRequested: continuation must be a str or None, not int (7)",
    ),
]


@pytest.mark.parametrize(
    ("check", "outcome", "message"),
    [
        *((check_deferred_tool_outcome, *case) for case in WRONGLY_TYPED_ANSWERS),
        *((check_tool_task_poll_outcome, *case) for case in WRONGLY_TYPED_ANSWERS),
        (
            check_deferred_tool_outcome,
            ToolTaskStarted(42, 5),  # type: ignore[arg-type]
            "ToolTaskStarted: task_id must be a str, not int (42)",
        ),
        (
            check_tool_task_poll_outcome,
            ToolTaskPending(5, continuation=b"q"),  # type: ignore[arg-type]
            "ToolTaskPending: continuation must be a str or None, not bytes (b'q')",
        ),
    ],
)
def test_an_outcome_field_of_the_wrong_type_is_refused_before_it_is_stored(
    check: Any, outcome: object, message: str
) -> None:
    # The session stores these fields on the call's record, and a record with a field of
    # the wrong type does not decode: before, every later read of the session failed.
    with pytest.raises(TypeError, match=exact(message)):
        check(outcome)


@pytest.mark.parametrize(
    ("message", "error", "text"),
    [
        (
            ANSWER,
            ValueError,
            "build_user_message must return a message with role user, not assistant",
        ),
        ("hello", TypeError, "build_user_message must return a FrameworkMessage, not str"),
        (
            FrameworkMessage(role=MessageRole.USER, framework_item={"text": "hi"}),  # type: ignore[arg-type]
            TypeError,
            "FrameworkMessage: framework_item must be a str, not dict ({'text': 'hi'})",
        ),
    ],
    ids=["assistant-role", "not-a-message", "item-not-text"],
)
def test_build_user_message_must_return_a_user_message(
    message: object, error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=exact(text)):
        check_user_message(message)


def test_a_user_message_passes() -> None:
    message = FrameworkMessage(role=MessageRole.USER, framework_item="{}", text="hi")
    assert check_user_message(message) is message


# --- Poll interval ---------------------------------------------------------------------


def test_the_poll_bounds_are_one_second_and_one_day() -> None:
    assert (MIN_TASK_POLL_SECONDS, MAX_TASK_POLL_SECONDS) == (1, 86_400)


@pytest.mark.parametrize(
    ("interval", "seconds"),
    [
        (-5, 1),
        (0, 1),
        (0.2, 1),
        (1, 1),
        (1.01, 2),
        (5, 5),
        (10.5, 11),
        (86_399.5, 86_400),
        (86_400, 86_400),
        (86_401, 86_400),
        (math.inf, 86_400),
        (-math.inf, 1),
        (10**400, 86_400),
        (-(10**400), 1),
    ],
)
def test_poll_intervals_round_up_to_whole_seconds_from_1_to_a_day(
    interval: float, seconds: int
) -> None:
    assert task_poll_seconds(interval) == seconds


@pytest.mark.parametrize("interval", [None, "5", True])
def test_a_poll_interval_that_is_not_a_number_is_refused_by_name(interval: object) -> None:
    message = (
        "poll_interval_seconds must be a number of seconds (an int or a float), "
        f"not {type(interval).__name__}"
    )
    with pytest.raises(TypeError, match=exact(message)):
        check_deferred_tool_outcome(ToolTaskStarted("job", interval))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=exact(message)):
        check_tool_task_poll_outcome(ToolTaskPending(interval))  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(interval=st.floats(allow_nan=False))
def test_a_poll_wait_is_the_smallest_whole_second_count_in_range_that_covers_the_interval(
    interval: float,
) -> None:
    seconds = task_poll_seconds(interval)
    assert isinstance(seconds, int)
    assert MIN_TASK_POLL_SECONDS <= seconds <= MAX_TASK_POLL_SECONDS
    if MIN_TASK_POLL_SECONDS <= interval <= MAX_TASK_POLL_SECONDS:
        assert seconds - 1 < interval <= seconds


# --- Tool Step options -----------------------------------------------------------------


def test_tool_step_options_default_to_the_session_defaults() -> None:
    options = ToolCallStepOptions()
    assert options.timeout is None
    assert options.retry_policy is None
    retry = ToolCallRetryPolicy()
    assert (retry.maximum_attempts, retry.backoff_coefficient) == (0, 0.0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ToolCallStepOptions(timeout=timedelta(0)),
            "timeout must be positive, not 0:00:00",
        ),
        (
            lambda: ToolCallRetryPolicy(maximum_attempts=-1),
            "maximum_attempts must be 0 (the default) or more, not -1",
        ),
        (
            lambda: ToolCallRetryPolicy(backoff_coefficient=-2.0),
            "backoff_coefficient must be 0 (the default) or more, not -2.0",
        ),
        (
            lambda: ToolCallRetryPolicy(initial_interval=timedelta(seconds=-1)),
            "initial_interval must be positive, not -1 day, 23:59:59",
        ),
        (
            lambda: ToolCallRetryPolicy(total_duration=timedelta(0)),
            "total_duration must be positive, not 0:00:00",
        ),
    ],
    ids=["timeout", "attempts", "backoff", "initial-interval", "total-duration"],
)
def test_tool_step_options_refuse_bad_values(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=exact(message)):
        build()


# --- Model input and output ------------------------------------------------------------


def test_a_model_request_keeps_lists_as_tuples_and_reads_its_items() -> None:
    result = ToolResultItem(tool_call_id="c1", tool_name="shot", output="ok", images=[IMAGE])
    request = ModelRequest(
        instructions="Help.",
        items=[UserTextItem(text="Hi", images=[IMAGE]), result, UserTextItem(text="More")],  # type: ignore[arg-type]
        tools=[],  # type: ignore[arg-type]
        tool_choice="required",  # type: ignore[arg-type]
    )
    assert isinstance(request.items, tuple)
    assert request.tool_choice is ModelToolChoice.REQUIRED
    assert request.user_texts == ("Hi", "More")
    assert request.tool_results == (result,)
    assert request.image_references == (IMAGE, IMAGE)
    assert request.image_bytes == {}
    assert request.max_output_tokens is None


def test_a_model_request_refuses_a_zero_output_budget() -> None:
    with pytest.raises(
        ValueError, match=exact("max_output_tokens must be None or at least 1, not 0")
    ):
        ModelRequest(instructions="", items=(), max_output_tokens=0)


def test_a_model_response_joins_text_and_lists_tool_calls_in_order() -> None:
    first = ModelToolCall(tool_call_id="c1", tool_name="a", arguments="{}")
    second = ModelToolCall(tool_call_id="c2", tool_name="b", arguments="{}")
    response = ModelResponse(
        output=[
            ModelOutputItem(item="{}", provider="openai", api="responses", text="Let me "),
            ModelOutputItem(item="{}", provider="openai", api="responses", tool_calls=[first]),
            ModelOutputItem(
                item="{}", provider="openai", api="responses", text="check.", tool_calls=[second]
            ),
        ],
        usage=USAGE,
    )
    assert response.text == "Let me check."
    assert response.tool_calls == (first, second)
    assert from_json(to_json(response), ModelResponse) == response
