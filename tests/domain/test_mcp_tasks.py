"""The pure rules of a polled MCP task: reading it, its outcome, and one poll's decision."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest

from dex_agents.domain.interrupts import QuestionAnswer, QuestionResolution
from dex_agents.domain.mcp_conventions import McpCallOutcomeKind, mcp_input_request_fingerprint
from dex_agents.domain.mcp_tasks import (
    McpTask,
    McpTaskContinuation,
    McpTaskPollAction,
    McpTaskStatus,
    decide_mcp_task_poll,
    lost_task_outcome,
    read_mcp_task,
    terminal_task_outcome,
)
from dex_agents.domain.tool_effects import ToolEffect

NOW = datetime(2026, 7, 28, 12, 0, tzinfo=UTC)
ACCOUNT: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "message": "Which account?",
        "requestedSchema": {
            "type": "object",
            "properties": {"account": {"type": "string", "enum": ["checking", "savings"]}},
        },
    },
}
FINGERPRINT = mcp_input_request_fingerprint(ACCOUNT)
ASKED = McpTaskContinuation(
    status=McpTaskStatus.INPUT_REQUIRED, request_key="a1", fingerprint=FINGERPRINT
)
ANSWER = QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer="savings")
DECLINE = QuestionAnswer(resolution=QuestionResolution.DECLINED)


def _task(status: str, **fields: Any) -> McpTask:
    return read_mcp_task({"taskId": "t1", "status": status, **fields})


def _asking(requests: dict[str, Any] | None = None) -> McpTask:
    return _task("input_required", inputRequests={"a1": ACCOUNT} if requests is None else requests)


def _text(text: str, **result: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **result}


def test_a_task_answer_is_read_with_its_payload() -> None:
    task = read_mcp_task(
        {
            "taskId": "t1",
            "status": "input_required",
            "statusMessage": "waiting",
            "pollIntervalMs": 2500,
            "inputRequests": {"a1": ACCOUNT},
        }
    )
    assert task == McpTask(
        task_id="t1",
        status=McpTaskStatus.INPUT_REQUIRED,
        status_message="waiting",
        poll_interval_ms=2500,
        input_requests={"a1": ACCOUNT},
    )


@pytest.mark.parametrize(
    "payload", [{"status": "working"}, {"taskId": "", "status": "working"}, {"taskId": "t1"}]
)
def test_an_answer_without_an_id_or_a_known_status_is_refused(payload: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="MCP task answer"):
        read_mcp_task({**payload, "status": payload.get("status", "paused")})


@pytest.mark.parametrize(
    ("task", "kind", "text"),
    [
        (_task("completed", result=_text("done")), McpCallOutcomeKind.SUCCEEDED, "done"),
        (
            _task("completed", result=_text("no", isError=True)),
            McpCallOutcomeKind.FAILED,
            "no",
        ),
        (
            _task(
                "completed",
                result=_text(
                    "timed out", isError=True, _meta={"io.superdurable.dex/outcome": "unknown"}
                ),
            ),
            McpCallOutcomeKind.OUTCOME_UNKNOWN,
            "timed out",
        ),
        (
            _task("failed", error={"code": -32603, "message": "rate limited"}),
            McpCallOutcomeKind.FAILED,
            "MCP error -32603: rate limited",
        ),
        (
            _task(
                "failed",
                error={
                    "code": -32000,
                    "message": "lost",
                    "data": {"_meta": {"io.superdurable.dex/outcome": "unknown"}},
                },
            ),
            McpCallOutcomeKind.OUTCOME_UNKNOWN,
            "MCP error -32000: lost",
        ),
        (_task("cancelled"), McpCallOutcomeKind.FAILED, "the MCP task was cancelled"),
        # Without an error object the text read "MCP error null: it broke".
        (_task("failed", statusMessage="it broke"), McpCallOutcomeKind.FAILED, "it broke"),
        (_task("failed"), McpCallOutcomeKind.FAILED, "the MCP task failed"),
    ],
)
def test_what_an_ended_task_records(task: McpTask, kind: McpCallOutcomeKind, text: str) -> None:
    outcome = terminal_task_outcome(task)
    assert (outcome.kind, outcome.text) == (kind, text)


def test_a_running_task_has_no_outcome() -> None:
    with pytest.raises(ValueError, match="has not ended"):
        terminal_task_outcome(_task("working"))


@pytest.mark.parametrize(
    ("effect", "kind"),
    [
        (ToolEffect.READ, McpCallOutcomeKind.FAILED),
        (ToolEffect.IDEMPOTENT_WRITE, McpCallOutcomeKind.OUTCOME_UNKNOWN),
        (ToolEffect.NON_IDEMPOTENT_WRITE, McpCallOutcomeKind.OUTCOME_UNKNOWN),
        (ToolEffect.UNCLASSIFIED, McpCallOutcomeKind.OUTCOME_UNKNOWN),
    ],
)
def test_a_lost_task_records_failed_only_for_a_read(
    effect: ToolEffect, kind: McpCallOutcomeKind
) -> None:
    assert lost_task_outcome(effect, "gone").kind is kind


@pytest.mark.parametrize(
    "continuation",
    [
        McpTaskContinuation(),
        ASKED,
        McpTaskContinuation(
            status=McpTaskStatus.WORKING,
            request_key="a1",
            fingerprint="f",
            sent_at=NOW,
            declined=True,
        ),
    ],
)
def test_a_continuation_round_trips(continuation: McpTaskContinuation) -> None:
    assert McpTaskContinuation.decode(continuation.encode()) == continuation


@pytest.mark.parametrize("text", [None, "", "not json", "[]", '{"status": "paused"}'])
def test_text_the_source_did_not_write_is_an_empty_continuation(text: str | None) -> None:
    assert McpTaskContinuation.decode(text) == McpTaskContinuation()


def _decide(
    task: McpTask,
    continuation: McpTaskContinuation = McpTaskContinuation(),  # noqa: B008 - frozen
    *,
    answer: QuestionAnswer | None = None,
    attempt: int = 1,
    effect: ToolEffect = ToolEffect.READ,
    previous: int | None = 4,
    now: datetime = NOW,
) -> Any:
    return decide_mcp_task_poll(
        task,
        continuation=continuation,
        pending_answer=answer,
        attempt=attempt,
        effect=effect,
        previous_seconds=previous,
        now=now,
    )


def test_a_working_task_polls_again_at_the_next_interval() -> None:
    decision = _decide(_task("working", pollIntervalMs=5000))
    assert decision.action is McpTaskPollAction.PENDING
    assert decision.poll_interval_seconds == 8  # double the previous 4 s beats the server's 5 s
    assert decision.continuation == McpTaskContinuation(status=McpTaskStatus.WORKING)


def test_an_ended_task_finishes_the_call() -> None:
    decision = _decide(_task("completed", result=_text("done")))
    assert decision.action is McpTaskPollAction.FINISH
    assert decision.outcome.text == "done"


def test_a_simple_form_becomes_a_question_keyed_by_its_request() -> None:
    decision = _decide(_asking())
    assert decision.action is McpTaskPollAction.ASK
    assert decision.question.choices == ("checking", "savings")
    assert decision.continuation == ASKED


def test_any_other_input_request_fails_the_call_and_cancels_the_task() -> None:
    decision = _decide(_asking({"a1": ACCOUNT, "a2": ACCOUNT}))
    assert decision.action is McpTaskPollAction.CANCEL_THEN_FINISH
    assert decision.outcome.kind is McpCallOutcomeKind.FAILED
    assert decision.outcome.text == (
        "the MCP server asked for input that this agent session cannot provide yet "
        "(an answer to 'Which account?'; an answer to 'Which account?')"
    )


@pytest.mark.parametrize(
    ("answer", "response", "declined"),
    [
        (ANSWER, {"action": "accept", "content": {"account": "savings"}}, False),
        (DECLINE, {"action": "decline"}, True),
        (
            QuestionAnswer(resolution=QuestionResolution.DEADLINE_PASSED),
            {"action": "cancel"},
            True,
        ),
    ],
)
def test_the_first_attempt_after_the_question_sends_its_resolution(
    answer: QuestionAnswer, response: dict[str, Any], declined: bool
) -> None:
    decision = _decide(_asking(), ASKED, answer=answer)
    assert decision.action is McpTaskPollAction.SEND_THEN_PENDING
    assert decision.input_response == response
    assert decision.poll_interval_seconds == 1
    assert decision.continuation == McpTaskContinuation(
        status=McpTaskStatus.INPUT_REQUIRED,
        request_key="a1",
        fingerprint=FINGERPRINT,
        sent_at=NOW,
        declined=declined,
    )


def test_a_retried_attempt_asks_again_instead_of_sending() -> None:
    decision = _decide(_asking(), ASKED, answer=ANSWER, attempt=2)
    assert decision.action is McpTaskPollAction.ASK
    assert decision.continuation == ASKED


def test_an_answer_is_never_sent_to_a_different_request() -> None:
    changed = {**ACCOUNT, "params": {**ACCOUNT["params"], "message": "Which other account?"}}
    decision = _decide(_asking({"a1": changed}), ASKED, answer=ANSWER)
    assert decision.action is McpTaskPollAction.ASK
    assert decision.question.question == "Which other account?"


SENT = McpTaskContinuation(
    status=McpTaskStatus.INPUT_REQUIRED, request_key="a1", fingerprint=FINGERPRINT, sent_at=NOW
)


@pytest.mark.parametrize(
    ("seconds", "action"),
    [(0, McpTaskPollAction.PENDING), (9.9, McpTaskPollAction.PENDING), (10, McpTaskPollAction.ASK)],
)
def test_the_answered_request_reads_as_working_for_ten_seconds_after_the_send(
    seconds: float, action: McpTaskPollAction
) -> None:
    decision = _decide(_asking(), SENT, now=NOW + timedelta(seconds=seconds))
    assert decision.action is action
    if action is McpTaskPollAction.PENDING:
        assert decision.poll_interval_seconds == 1
        assert decision.continuation == SENT


def test_once_the_task_works_again_an_identical_request_is_a_new_question() -> None:
    working = _decide(_task("working"), SENT, now=NOW + timedelta(seconds=1))
    assert working.continuation == McpTaskContinuation(status=McpTaskStatus.WORKING)
    again = _decide(_asking(), working.continuation, now=NOW + timedelta(seconds=2))
    assert again.action is McpTaskPollAction.ASK


@pytest.mark.parametrize(
    ("effect", "kind"),
    [
        (ToolEffect.READ, McpCallOutcomeKind.FAILED),
        (ToolEffect.IDEMPOTENT_WRITE, McpCallOutcomeKind.OUTCOME_UNKNOWN),
    ],
)
def test_a_task_cancelled_after_a_decline_is_recorded_by_its_effect(
    effect: ToolEffect, kind: McpCallOutcomeKind
) -> None:
    declined = McpTaskContinuation(status=McpTaskStatus.INPUT_REQUIRED, sent_at=NOW, declined=True)
    decision = _decide(_task("cancelled"), declined, effect=effect)
    assert decision.action is McpTaskPollAction.FINISH
    assert decision.outcome.kind is kind


@pytest.mark.parametrize(
    ("between", "effect", "kind"),
    [
        (("working",), ToolEffect.READ, McpCallOutcomeKind.FAILED),
        (("working",), ToolEffect.NON_IDEMPOTENT_WRITE, McpCallOutcomeKind.OUTCOME_UNKNOWN),
        (("working",), ToolEffect.UNCLASSIFIED, McpCallOutcomeKind.OUTCOME_UNKNOWN),
        (("working", "working"), ToolEffect.IDEMPOTENT_WRITE, McpCallOutcomeKind.OUTCOME_UNKNOWN),
        (("input_required", "working"), ToolEffect.READ, McpCallOutcomeKind.FAILED),
        (
            ("input_required", "working"),
            ToolEffect.NON_IDEMPOTENT_WRITE,
            McpCallOutcomeKind.OUTCOME_UNKNOWN,
        ),
    ],
)
def test_a_decline_is_remembered_across_the_polls_before_the_task_is_cancelled(
    between: tuple[str, ...], effect: ToolEffect, kind: McpCallOutcomeKind
) -> None:
    # Found by an audit: a working poll dropped the decline, so a write whose task the
    # server cancelled after it was recorded failed instead of outcome_unknown.
    continuation = attrs.evolve(SENT, declined=True)
    for second, status in enumerate(between, start=1):
        task = _asking() if status == "input_required" else _task(status)
        polled = _decide(task, continuation, effect=effect, now=NOW + timedelta(seconds=second))
        assert polled.action is McpTaskPollAction.PENDING
        continuation = polled.continuation
    decision = _decide(_task("cancelled"), continuation, effect=effect)
    assert decision.action is McpTaskPollAction.FINISH
    assert decision.outcome.kind is kind
    assert "declined" in decision.outcome.text
