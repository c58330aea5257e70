"""Final tool call records: what each recovery Step records and what the model reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.errors import (
    ImageValidationError,
    ToolExecutionError,
    ToolOutcomeUnknownError,
)
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.runner_outcomes import ToolExecutionResult
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.tool_outcomes import (
    CANCELLED_TOOL_RESULTS,
    MISSING_TOOL_TASK_POLLER,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    STEERED_TOOL_RESULT,
    TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    TOOL_CALL_REJECTED_RESULT,
    TURN_CANCELLED_TOOL_RESULT,
    abandon_tool_task,
    build_turn_failure_note,
    cancel_unstarted_tool_call,
    describe_tool_call_outcome,
    has_run_before,
    not_run_error,
    record_missing_tool_task_poller,
    record_tool_error,
    record_tool_failure,
    record_tool_outcome_unknown,
    record_tool_result,
)

FINAL = [
    ToolCallStatus.REJECTED,
    ToolCallStatus.SUCCEEDED,
    ToolCallStatus.FAILED,
    ToolCallStatus.OUTCOME_UNKNOWN,
]
WAITING = [status for status in ToolCallStatus if status not in FINAL]
WRITES = [ToolEffect.IDEMPOTENT_WRITE, ToolEffect.NON_IDEMPOTENT_WRITE, ToolEffect.UNCLASSIFIED]


def _record(**overrides: Any) -> AgentToolCall:
    fields: dict[str, Any] = {
        "tool_call_id": "call-1",
        "tool_name": "refund_order",
        "arguments": '{"order_id":"7"}',
        "turn_id": "turn-1",
        "effect": ToolEffect.NON_IDEMPOTENT_WRITE,
        "requires_approval": True,
        "status": ToolCallStatus.APPROVED,
        "deferral_order": 0,
    }
    fields.update(overrides)
    return AgentToolCall(**fields)


def test_the_texts_are_the_spec_texts() -> None:
    assert TOOL_CALL_NOT_RUN_ERROR_PREFIX == "the tool did not run, so it is safe to call again"
    assert STEERED_TOOL_RESULT == (
        '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'
    )
    assert TURN_CANCELLED_TOOL_RESULT == '{"status":"cancelled","reason":"turn_cancelled_by_user"}'
    assert CANCELLED_TOOL_RESULTS == {
        CancellationReason.STEERED: STEERED_TOOL_RESULT,
        CancellationReason.TURN_CANCELLED: TURN_CANCELLED_TOOL_RESULT,
    }


def test_the_texts_the_spec_leaves_open() -> None:
    assert OUTCOME_UNKNOWN_TOOL_RESULT == (
        "The outcome of this tool call is unknown: it may or may not have taken effect. "
        "Do not call it again blindly; check whether it took effect first, or ask the user."
    )
    assert MISSING_TOOL_TASK_POLLER == (
        "the tool started a task, but the runner cannot poll tool tasks: "
        "it does not implement ToolTaskPoller.poll_tool_task"
    )
    assert TOOL_CALL_REJECTED_RESULT == "The tool call was not approved, so it did not run."


def test_not_run_error_joins_prefix_and_detail() -> None:
    assert not_run_error("worker lost") == (
        "the tool did not run, so it is safe to call again: worker lost"
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            {"status": "succeeded", "output": "refunded 500"}, "refunded 500", id="succeeded"
        ),
        pytest.param({"status": "succeeded"}, "", id="succeeded without output"),
        pytest.param(
            {"status": "failed", "error": "order 7 not found"},
            "The tool call failed: order 7 not found",
            id="failed",
        ),
        pytest.param(
            {"status": "failed"}, "The tool call failed: unknown error", id="failed without error"
        ),
        pytest.param(
            {"status": "failed", "skipped": True, "error": not_run_error("skipped")},
            "The tool call failed: the tool did not run, so it is safe to call again: skipped",
            id="failed and never run",
        ),
        pytest.param(
            {"status": "outcome_unknown", "error": "stream broke"},
            OUTCOME_UNKNOWN_TOOL_RESULT,
            id="outcome unknown",
        ),
        pytest.param(
            {
                "status": "outcome_unknown",
                "task_id": "job-1",
                "cancellation_reason": "turn_cancelled",
            },
            OUTCOME_UNKNOWN_TOOL_RESULT,
            id="abandoned task",
        ),
        pytest.param(
            {"status": "rejected", "rejection_message": "Too large a refund"},
            "Too large a refund",
            id="rejected with a message",
        ),
        pytest.param({"status": "rejected"}, TOOL_CALL_REJECTED_RESULT, id="rejected"),
        pytest.param(
            {"status": "rejected", "rejection_message": "  "},
            TOOL_CALL_REJECTED_RESULT,
            id="rejected with a blank message",
        ),
        pytest.param(
            {"status": "rejected", "cancellation_reason": "steered"},
            '{"status":"cancelled","reason":"superseded_by_steered_user_message"}',
            id="steered",
        ),
        pytest.param(
            {"status": "rejected", "cancellation_reason": "turn_cancelled"},
            '{"status":"cancelled","reason":"turn_cancelled_by_user"}',
            id="turn cancelled",
        ),
        pytest.param(
            {
                "status": "rejected",
                "cancellation_reason": "steered",
                "rejection_message": "ignored",
            },
            STEERED_TOOL_RESULT,
            id="a cancellation wins over a rejection message",
        ),
    ],
)
def test_describe_tool_call_outcome(overrides: dict[str, Any], expected: str) -> None:
    assert describe_tool_call_outcome(_record(**overrides)) == expected


@pytest.mark.parametrize("status", WAITING)
def test_a_record_that_is_not_final_has_no_outcome(status: ToolCallStatus) -> None:
    with pytest.raises(ValueError, match=rf"tool call 'call-1' is {status.value}, not final"):
        describe_tool_call_outcome(_record(status=status))


# --- recovery Steps ---------------------------------------------------------

RECOVERY = [
    # effect, route function, never started, ran before, expected status, expected error
    (ToolEffect.READ, record_tool_failure, False, {}, "failed", "boom"),
    (ToolEffect.IDEMPOTENT_WRITE, record_tool_failure, False, {}, "outcome_unknown", "boom"),
    (ToolEffect.READ, record_tool_failure, True, {}, "failed", not_run_error("boom")),
    (
        ToolEffect.IDEMPOTENT_WRITE,
        record_tool_failure,
        True,
        {},
        "failed",
        not_run_error("boom"),
    ),
    (
        ToolEffect.IDEMPOTENT_WRITE,
        record_tool_failure,
        True,
        {"input_request_count": 1},
        "outcome_unknown",
        "boom",
    ),
    (
        ToolEffect.IDEMPOTENT_WRITE,
        record_tool_failure,
        True,
        {"task_id": "job-1", "status": "waiting_for_task"},
        "outcome_unknown",
        "boom",
    ),
    (ToolEffect.READ, record_tool_failure, True, {"input_request_count": 2}, "failed", "boom"),
    (
        ToolEffect.NON_IDEMPOTENT_WRITE,
        record_tool_outcome_unknown,
        False,
        {},
        "outcome_unknown",
        "boom",
    ),
    (ToolEffect.UNCLASSIFIED, record_tool_outcome_unknown, False, {}, "outcome_unknown", "boom"),
    (
        ToolEffect.NON_IDEMPOTENT_WRITE,
        record_tool_outcome_unknown,
        True,
        {},
        "failed",
        not_run_error("boom"),
    ),
    (
        ToolEffect.UNCLASSIFIED,
        record_tool_outcome_unknown,
        True,
        {"input_request_count": 1},
        "outcome_unknown",
        "boom",
    ),
    (
        ToolEffect.NON_IDEMPOTENT_WRITE,
        record_tool_outcome_unknown,
        True,
        {"task_id": "job-1", "status": "waiting_for_task"},
        "outcome_unknown",
        "boom",
    ),
    (
        ToolEffect.READ,
        record_tool_outcome_unknown,
        False,
        {"task_id": "job-1"},
        "outcome_unknown",
        "boom",
    ),
    # AwaitToolApproval failed: the call never reached its tool Step.
    (
        ToolEffect.NON_IDEMPOTENT_WRITE,
        record_tool_outcome_unknown,
        False,
        {"status": "awaiting_approval"},
        "failed",
        not_run_error("boom"),
    ),
    (
        ToolEffect.IDEMPOTENT_WRITE,
        record_tool_failure,
        False,
        {"status": "awaiting_approval"},
        "failed",
        not_run_error("boom"),
    ),
]


@pytest.mark.parametrize(
    ("effect", "route", "never_started", "ran_before", "status", "error"), RECOVERY
)
def test_recovery_steps(
    effect: ToolEffect,
    route: Callable[[AgentToolCall, str, bool], AgentToolCall],
    never_started: bool,
    ran_before: dict[str, Any],
    status: str,
    error: str,
) -> None:
    before = _record(effect=effect, **ran_before)
    after = route(before, "boom", never_started)
    assert after.status == status
    assert after.error == error
    # Nothing else of the record changes.
    assert after == attrs.evolve(before, status=status, error=error)


@settings(max_examples=75, deadline=None)
@given(
    status=st.sampled_from(FINAL),
    effect=st.sampled_from(ToolEffect),
    never_started=st.booleans(),
    detail=st.text(max_size=20),
)
def test_a_final_record_is_never_changed(
    status: ToolCallStatus, effect: ToolEffect, never_started: bool, detail: str
) -> None:
    record = _record(status=status, effect=effect, error="first", output="out")
    assert record_tool_failure(record, detail, never_started) is record
    assert record_tool_outcome_unknown(record, detail, never_started) is record
    assert record_tool_error(record, ToolExecutionError(detail)) is record
    assert record_tool_error(record, ToolOutcomeUnknownError(detail)) is record
    assert record_missing_tool_task_poller(record) is record
    assert cancel_unstarted_tool_call(record, CancellationReason.STEERED) is record
    assert abandon_tool_task(record) is record
    assert record_tool_result(record, ToolExecutionResult(detail)) is record


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, False),
        ({"input_request_count": 1}, True),
        ({"task_id": "job-1"}, True),
        ({"input_request_count": 3, "task_id": "job-1"}, True),
    ],
)
def test_has_run_before(overrides: dict[str, Any], expected: bool) -> None:
    assert has_run_before(_record(**overrides)) is expected


@pytest.mark.parametrize("effect", list(ToolEffect))
def test_tool_execution_error_records_failed_with_its_message(effect: ToolEffect) -> None:
    after = record_tool_error(_record(effect=effect), ToolExecutionError("order 7 not found"))
    assert (after.status, after.error) == (ToolCallStatus.FAILED, "order 7 not found")


@pytest.mark.parametrize("effect", list(ToolEffect))
def test_tool_outcome_unknown_error_records_outcome_unknown(effect: ToolEffect) -> None:
    after = record_tool_error(_record(effect=effect), ToolOutcomeUnknownError("timed out"))
    assert (after.status, after.error) == (ToolCallStatus.OUTCOME_UNKNOWN, "timed out")


_SHA = "9f2c" + "0" * 60
_IMAGE = AgentImageReference(
    uri=f"s3://agent-media/sha256/{_SHA}", mime_type="image/png", sha256=_SHA, size_bytes=3
)


@pytest.mark.parametrize("status", [ToolCallStatus.APPROVED, ToolCallStatus.WAITING_FOR_TASK])
def test_a_tool_result_records_succeeded_with_its_output_and_images(
    status: ToolCallStatus,
) -> None:
    before = _record(status=status)
    result = ToolExecutionResult("refunded", (_IMAGE,), truncated_output_bytes=9000)
    after = record_tool_result(before, result)
    assert after == attrs.evolve(
        before,
        status=ToolCallStatus.SUCCEEDED,
        output="refunded",
        images=(_IMAGE,),
        truncated_output_bytes=9000,
    )


def test_a_tool_result_with_an_invalid_image_is_refused() -> None:
    bad = attrs.evolve(_IMAGE, sha256="not-hex")
    with pytest.raises(ImageValidationError, match="image 1"):
        record_tool_result(_record(), ToolExecutionResult("out", (bad,)))


def test_record_tool_error_refuses_other_exceptions() -> None:
    with pytest.raises(TypeError, match="not RuntimeError"):
        record_tool_error(_record(), RuntimeError("x"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("effect", "status"),
    [(ToolEffect.READ, ToolCallStatus.FAILED)]
    + [(effect, ToolCallStatus.OUTCOME_UNKNOWN) for effect in WRITES],
)
def test_a_missing_task_poller_records_by_effect(
    effect: ToolEffect, status: ToolCallStatus
) -> None:
    after = record_missing_tool_task_poller(_record(effect=effect))
    assert (after.status, after.error) == (status, MISSING_TOOL_TASK_POLLER)


@pytest.mark.parametrize("reason", list(CancellationReason))
@pytest.mark.parametrize(
    "status",
    [
        ToolCallStatus.AWAITING_APPROVAL,
        ToolCallStatus.APPROVED,
        ToolCallStatus.AWAITING_ANSWER,
        ToolCallStatus.WAITING_FOR_TIMER,
    ],
)
def test_a_call_that_had_not_started_is_rejected_with_the_reason(
    reason: CancellationReason, status: ToolCallStatus
) -> None:
    after = cancel_unstarted_tool_call(_record(status=status, write_queued=True), reason)
    assert after.status is ToolCallStatus.REJECTED
    assert after.cancellation_reason is reason
    assert after.write_queued is False
    assert describe_tool_call_outcome(after) == CANCELLED_TOOL_RESULTS[reason]


def test_a_started_task_is_never_rejected() -> None:
    record = _record(status=ToolCallStatus.WAITING_FOR_TASK, task_id="job-1")
    with pytest.raises(ValueError, match=r"tool call 'call-1' started task 'job-1'"):
        cancel_unstarted_tool_call(record, CancellationReason.STEERED)


def test_an_abandoned_task_records_outcome_unknown_turn_cancelled() -> None:
    record = _record(status=ToolCallStatus.WAITING_FOR_TASK, task_id="job-1")
    after = abandon_tool_task(record)
    assert after.status is ToolCallStatus.OUTCOME_UNKNOWN
    assert after.cancellation_reason is CancellationReason.TURN_CANCELLED
    assert after.task_id == "job-1"
    assert describe_tool_call_outcome(after) == OUTCOME_UNKNOWN_TOOL_RESULT


def test_abandoning_a_call_without_a_task_is_refused() -> None:
    with pytest.raises(ValueError, match=r"tool call 'call-1' started no task to abandon"):
        abandon_tool_task(_record())


# --- the turn-failure note --------------------------------------------------


def test_the_turn_failure_note_lists_final_records_in_deferral_order() -> None:
    records = [
        _record(
            tool_call_id="b",
            tool_name="refund_order",
            arguments='{"order_id":"7","amount_cents":500}',
            status="outcome_unknown",
            deferral_order=2,
        ),
        _record(
            tool_call_id="a",
            tool_name="lookup_order",
            arguments='{"order_id":"7"}',
            effect="read",
            status="succeeded",
            output='{"status":"shipped"}',
            deferral_order=1,
        ),
        _record(tool_call_id="c", tool_name="email", status="awaiting_approval", deferral_order=3),
        _record(
            tool_call_id="d",
            tool_name="email",
            arguments="{}",
            status="rejected",
            cancellation_reason="steered",
            deferral_order=4,
        ),
    ]
    assert build_turn_failure_note(records) == (
        "[Dex] The previous turn failed after these tool calls ran:\n"
        '- lookup_order {"order_id":"7"} -> succeeded: {"status":"shipped"}\n'
        '- refund_order {"order_id":"7","amount_cents":500} -> outcome_unknown: '
        + OUTCOME_UNKNOWN_TOOL_RESULT
        + "\n"
        '- email {} -> rejected: {"status":"cancelled","reason":"superseded_by_steered_user_message"}\n'
        "Do not repeat these tool calls unless the user asks again."
    )


def test_the_turn_failure_note_of_a_failed_call() -> None:
    record = _record(tool_name="t", arguments="{}", status="failed", error="bad id")
    assert build_turn_failure_note([record]) == (
        "[Dex] The previous turn failed after these tool calls ran:\n"
        "- t {} -> failed: The tool call failed: bad id\n"
        "Do not repeat these tool calls unless the user asks again."
    )


@pytest.mark.parametrize(
    "records",
    [[], [_record(status="approved"), _record(tool_call_id="x", status="waiting_for_task")]],
)
def test_no_final_record_gives_no_note(records: list[AgentToolCall]) -> None:
    assert build_turn_failure_note(records) is None
