"""Questions of ``ask_user``, tools and tool tasks: interrupt IDs and the records they leave."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.interrupts import QuestionAnswer, QuestionResolution
from dex_agents.domain.runner_outcomes import ToolInputRequested, ToolTaskPending, ToolTaskStarted
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.tool_outcomes import describe_tool_call_outcome
from dex_agents.domain.tool_questions import (
    QUESTION_RESOLUTION_MESSAGES,
    ask_tool_question,
    hand_over_task_answer,
    interrupt_id_in_use_error,
    is_question_raised,
    keep_polling,
    pending_task_answer,
    question_interrupt_id,
    raise_question,
    refuse_question_in_use,
    settle_question,
    start_tool_task,
    tool_question_interrupt_id,
    with_task_answer,
)


def _record(**overrides: Any) -> AgentToolCall:
    fields: dict[str, Any] = {
        "tool_call_id": "call-1",
        "tool_name": "publish",
        "arguments": "{}",
        "turn_id": "turn-1",
        "effect": ToolEffect.READ,
        "requires_approval": False,
        "status": ToolCallStatus.APPROVED,
        "deferral_order": 0,
    }
    fields.update(overrides)
    return AgentToolCall(**fields)


ANSWERED = QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer="blue")
DECLINED = QuestionAnswer(resolution=QuestionResolution.DECLINED)
EXPIRED = QuestionAnswer(resolution=QuestionResolution.DEADLINE_PASSED)
ASK_USER = {"built_in": True, "tool_name": "ask_user"}
TASK = {"task_id": "job-1", "status": ToolCallStatus.AWAITING_ANSWER}


def test_the_texts_the_model_reads_for_an_unanswered_question() -> None:
    assert dict(QUESTION_RESOLUTION_MESSAGES) == {
        QuestionResolution.DECLINED: "The user declined to answer.",
        QuestionResolution.DEADLINE_PASSED: "question deadline passed",
    }
    assert interrupt_id_in_use_error("x-input-1") == (
        "the tool asked a question, but its interrupt ID x-input-1 is already used "
        "by another tool call or interrupt of this turn"
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (ASK_USER, "call-1"),
        ({"input_request_count": 1}, "call-1-input-1"),
        ({"input_request_count": 12, "task_id": "job-1"}, "call-1-input-12"),
    ],
)
def test_question_interrupt_ids(overrides: dict[str, Any], expected: str) -> None:
    assert question_interrupt_id(_record(**overrides)) == expected


def test_a_tools_question_is_stored_not_raised_and_counted() -> None:
    first = ask_tool_question(
        _record(), ToolInputRequested("Which?", choices=("a", "b"), continuation="q1")
    )
    assert (first.status, first.question, first.choices) == (
        ToolCallStatus.AWAITING_ANSWER,
        "Which?",
        ("a", "b"),
    )
    assert (first.input_request_count, first.input_continuation) == (1, "q1")
    assert not is_question_raised(first)
    raised = raise_question(
        first, "call-1-input-1", question="Which?", choices=("a", "b"), allows_free_text=True
    )
    assert is_question_raised(raised)
    again = ask_tool_question(raised, ToolInputRequested("And?"))
    assert (again.input_request_count, again.interrupt_id, again.input_continuation) == (
        2,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("overrides", "answer", "status", "model_reads"),
    [
        (ASK_USER, ANSWERED, ToolCallStatus.SUCCEEDED, '{"status":"answered","answer":"blue"}'),
        (ASK_USER, DECLINED, ToolCallStatus.REJECTED, "The user declined to answer."),
        (ASK_USER, EXPIRED, ToolCallStatus.REJECTED, "question deadline passed"),
        ({}, DECLINED, ToolCallStatus.REJECTED, "The user declined to answer."),
        ({}, EXPIRED, ToolCallStatus.REJECTED, "question deadline passed"),
    ],
)
def test_a_question_that_ends_the_call(
    overrides: dict[str, Any], answer: QuestionAnswer, status: ToolCallStatus, model_reads: str
) -> None:
    settled = settle_question(_record(status=ToolCallStatus.AWAITING_ANSWER, **overrides), answer)
    assert settled.status is status
    assert describe_tool_call_outcome(settled) == model_reads


def test_an_answered_tool_question_runs_the_tool_again_with_the_answers() -> None:
    record = _record(status=ToolCallStatus.AWAITING_ANSWER, input_answers=("a",))
    settled = settle_question(record, ANSWERED)
    assert (settled.status, settled.input_answers) == (ToolCallStatus.APPROVED, ("a", "blue"))


@pytest.mark.parametrize("answer", [ANSWERED, DECLINED, EXPIRED])
def test_a_tasks_question_never_ends_the_call(answer: QuestionAnswer) -> None:
    settled = settle_question(_record(**TASK), answer)
    assert settled.status is ToolCallStatus.WAITING_FOR_TASK
    assert settled.task_answer_pending
    assert pending_task_answer(settled) == (
        QuestionAnswer(resolution=answer.resolution, answer=answer.answer)
    )
    handed = hand_over_task_answer(settled)
    assert pending_task_answer(handed) is None
    assert handed.rejection_message is None


@settings(max_examples=75, deadline=None)
@given(
    resolution=st.sampled_from(list(QuestionResolution)),
    text=st.text(),
    earlier=st.lists(st.text(), max_size=3),
)
def test_a_pending_task_answer_round_trips_through_the_record(
    resolution: QuestionResolution, text: str, earlier: list[str]
) -> None:
    answer = QuestionAnswer(
        resolution=resolution, answer=text if resolution is QuestionResolution.ANSWERED else None
    )
    record = with_task_answer(_record(**TASK, input_answers=tuple(earlier)), answer)
    assert pending_task_answer(record) == answer
    assert pending_task_answer(hand_over_task_answer(record)) is None


def test_a_task_polls_at_whole_seconds_and_keeps_the_last_continuation() -> None:
    started = start_tool_task(_record(), ToolTaskStarted(task_id="job-1", poll_interval_seconds=0))
    assert (started.status, started.task_id, started.task_poll_interval_seconds) == (
        ToolCallStatus.WAITING_FOR_TASK,
        "job-1",
        1,
    )
    pending = keep_polling(started, ToolTaskPending(poll_interval_seconds=2.5, continuation="q"))
    assert (pending.task_poll_interval_seconds, pending.input_continuation) == (3, "q")
    cleared = keep_polling(pending, ToolTaskPending(poll_interval_seconds=10**9))
    assert (cleared.task_poll_interval_seconds, cleared.input_continuation) == (86400, None)


@pytest.mark.parametrize(
    ("effect", "task", "status"),
    [
        (ToolEffect.NON_IDEMPOTENT_WRITE, False, ToolCallStatus.FAILED),
        (ToolEffect.READ, True, ToolCallStatus.FAILED),
        (ToolEffect.IDEMPOTENT_WRITE, True, ToolCallStatus.OUTCOME_UNKNOWN),
        (ToolEffect.NON_IDEMPOTENT_WRITE, True, ToolCallStatus.OUTCOME_UNKNOWN),
    ],
)
def test_a_question_whose_interrupt_id_is_in_use_ends_a_started_task_by_its_effect(
    effect: ToolEffect, task: bool, status: ToolCallStatus
) -> None:
    # A tool's own question comes before any effect; a task's comes after it started.
    asking = _record(effect=effect, status=ToolCallStatus.AWAITING_ANSWER)
    if task:
        asking = _record(effect=effect, **TASK)
    refused = refuse_question_in_use(asking, "call-1-input-1")
    assert (refused.status, refused.error) == (status, interrupt_id_in_use_error("call-1-input-1"))


def test_handing_over_without_a_pending_answer_changes_nothing() -> None:
    record = _record(**TASK)
    assert hand_over_task_answer(record) is record
    assert tool_question_interrupt_id("a", 3) == "a-input-3"
