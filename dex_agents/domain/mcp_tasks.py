"""The pure rules of a polled MCP task ("Long-running MCP tasks", "Input requests").

One ``tasks/get`` answer, the call's continuation and the pending answer decide
one ``McpTaskPollDecision``; the MCP adapter sends what it says (``tasks/update``,
``tasks/cancel``) and returns the runner outcome. The continuation is the opaque
text the session keeps as ``input_continuation``: the status the last poll saw,
and the input request the session asked (its key and fingerprint), with the time
its answer was sent. For ``ANSWER_WINDOW`` after that send, the task may still
list the answered request, so polls run a second apart and read it as working;
after that, or once the task left ``input_required``, an identical request is a
new question.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import attrs

from dex_agents.domain.interrupts import QuestionAnswer, QuestionResolution
from dex_agents.domain.mcp_conventions import (
    McpCallOutcome,
    McpCallOutcomeKind,
    McpInputQuestion,
    classify_mcp_error_response,
    classify_mcp_tool_result,
    map_mcp_input_request,
    mcp_input_request_fingerprint,
    mcp_input_response,
    mcp_unanswerable_input_text,
    next_mcp_task_poll_interval,
)
from dex_agents.domain.tool_effects import ToolEffect

ANSWER_WINDOW = timedelta(seconds=10)
"""How long after ``tasks/update`` the answered request still reads as working."""

ANSWER_WINDOW_POLL_SECONDS = 1
"""The poll interval inside ``ANSWER_WINDOW``."""

MCP_TASK_CANCELLED_TEXT = "the MCP task was cancelled"
"""The error of a call whose task ended ``cancelled``."""

MCP_TASK_FAILED_TEXT = "the MCP task failed"
"""The error of a call whose task ended ``failed`` with neither an ``error`` nor a message."""


class McpTaskStatus(StrEnum):
    """A task's ``status`` in ``tasks/get``."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """Whether the task ended: ``completed``, ``failed`` or ``cancelled``."""
        return self in (McpTaskStatus.COMPLETED, McpTaskStatus.FAILED, McpTaskStatus.CANCELLED)


@attrs.frozen(kw_only=True)
class McpTask:
    """One ``tasks/get`` answer (or a ``CreateTaskResult``), read by ``read_mcp_task``."""

    task_id: str
    status: McpTaskStatus = attrs.field(converter=McpTaskStatus)
    status_message: str | None = None
    poll_interval_ms: int | float | None = None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    input_requests: Mapping[str, Any] = attrs.field(factory=dict)


def read_mcp_task(payload: Mapping[str, Any]) -> McpTask:
    """The task of a ``tasks/get`` answer; ``ValueError`` when it has no ID or known status."""
    task_id, status = payload.get("taskId"), payload.get("status")
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"an MCP task answer without a taskId: {payload!r}")
    if not isinstance(status, str) or status not in McpTaskStatus.__members__.values():
        raise ValueError(f"an MCP task answer with an unknown status {status!r}")
    message, result, error = (payload.get(k) for k in ("statusMessage", "result", "error"))
    requests, interval = payload.get("inputRequests"), payload.get("pollIntervalMs")
    if isinstance(interval, bool) or not isinstance(interval, int | float):
        interval = None  # next_mcp_task_poll_interval reads anything else as missing too
    return McpTask(
        task_id=task_id,
        status=status,
        status_message=message if isinstance(message, str) else None,
        poll_interval_ms=interval,
        result=result if isinstance(result, Mapping) else None,
        error=error if isinstance(error, Mapping) else None,
        input_requests=requests if isinstance(requests, Mapping) else {},
    )


def terminal_task_outcome(task: McpTask, *, uploads_images: bool = True) -> McpCallOutcome:
    """What a call records for a task that ended.

    ``completed``: the result, classified as a ``tools/call`` result (the Dex
    ``outcome`` key included; ``uploads_images`` as there). ``failed``: the error's text, ``failed`` unless its
    Dex ``outcome`` key says ``unknown``; a task's error is never re-issued.
    A failed task without an ``error`` object records its ``statusMessage``, or
    ``MCP_TASK_FAILED_TEXT``. ``cancelled``: ``failed``.
    """
    if task.status is McpTaskStatus.COMPLETED:
        return classify_mcp_tool_result(task.result or {}, uploads_images=uploads_images)
    if task.status is McpTaskStatus.FAILED:
        if task.error is None:
            # No JSON-RPC error to quote: "MCP error null: ..." would tell the model nothing.
            text = task.status_message if task.status_message else MCP_TASK_FAILED_TEXT
            return McpCallOutcome(kind=McpCallOutcomeKind.FAILED, text=text)
        outcome = classify_mcp_error_response(task.error)
        if outcome.kind is McpCallOutcomeKind.INTERRUPTED:
            return attrs.evolve(outcome, kind=McpCallOutcomeKind.FAILED)
        return outcome
    if task.status is McpTaskStatus.CANCELLED:
        return McpCallOutcome(kind=McpCallOutcomeKind.FAILED, text=MCP_TASK_CANCELLED_TEXT)
    raise ValueError(f"MCP task {task.task_id} has not ended: {task.status}")


def lost_task_outcome(effect: ToolEffect, text: str) -> McpCallOutcome:
    """A task the session cannot follow any more: ``failed`` for a ``read``, else unknown.

    The server no longer knows it, or could not take a decline; the task may have
    taken effect, so only a read is safe to record as failed.
    """
    kind = (
        McpCallOutcomeKind.FAILED
        if effect is ToolEffect.READ
        else McpCallOutcomeKind.OUTCOME_UNKNOWN
    )
    return McpCallOutcome(kind=kind, text=text)


@attrs.frozen(kw_only=True)
class McpTaskContinuation:
    """What the session keeps between polls of one task (as ``input_continuation``).

    ``status`` is the last status seen. ``request_key`` and ``fingerprint`` name
    the input request the session asked about; ``sent_at`` is when its answer went
    out with ``tasks/update``; ``declined`` marks a decline or a passed deadline, kept
    over later polls until the task ends or asks a new question.
    """

    status: McpTaskStatus | None = None
    request_key: str | None = None
    fingerprint: str | None = None
    sent_at: datetime | None = None
    declined: bool = False

    def encode(self) -> str:
        """Compact JSON with sorted keys, leaving out empty fields."""
        data: dict[str, Any] = {
            "status": None if self.status is None else self.status.value,
            "requestKey": self.request_key,
            "fingerprint": self.fingerprint,
            "sentAt": None if self.sent_at is None else self.sent_at.isoformat(),
            "declined": self.declined or None,
        }
        return json.dumps({k: v for k, v in data.items() if v is not None}, sort_keys=True)

    @classmethod
    def decode(cls, text: str | None) -> McpTaskContinuation:
        """The continuation in ``text``; an empty one for ``None`` or text it did not write."""
        try:
            data = json.loads(text or "{}")
            sent_at = data.get("sentAt")
            return cls(
                status=None if data.get("status") is None else McpTaskStatus(data["status"]),
                request_key=data.get("requestKey"),
                fingerprint=data.get("fingerprint"),
                sent_at=None if sent_at is None else datetime.fromisoformat(sent_at),
                declined=bool(data.get("declined", False)),
            )
        except (ValueError, TypeError, AttributeError):
            return cls()

    def lists_same_request(self, task: McpTask) -> bool:
        """Whether ``task`` still lists the request this continuation names, unchanged."""
        if task.status is not McpTaskStatus.INPUT_REQUIRED or self.request_key is None:
            return False
        request = task.input_requests.get(self.request_key)
        return request is not None and mcp_input_request_fingerprint(request) == self.fingerprint


class McpTaskPollAction(StrEnum):
    """What one poll does after ``tasks/get``."""

    PENDING = "pending"
    """Poll again after ``poll_interval_seconds``, keeping ``continuation``."""
    SEND_THEN_PENDING = "send_then_pending"
    """Send ``input_response`` for ``request_key`` with ``tasks/update``, then poll again."""
    ASK = "ask"
    """Ask the user ``question``."""
    FINISH = "finish"
    """Record ``outcome``."""
    CANCEL_THEN_FINISH = "cancel_then_finish"
    """Cancel the task best-effort with ``tasks/cancel``, then record ``outcome``."""


@attrs.frozen(kw_only=True)
class McpTaskPollDecision:
    """The decision of one poll; the fields its ``action`` names are set."""

    action: McpTaskPollAction
    continuation: McpTaskContinuation = attrs.field(factory=McpTaskContinuation)
    poll_interval_seconds: int = 1
    question: McpInputQuestion | None = None
    input_response: Mapping[str, Any] | None = None
    outcome: McpCallOutcome | None = None


def _pending(
    task: McpTask, previous_seconds: int | None, continuation: McpTaskContinuation
) -> McpTaskPollDecision:
    return McpTaskPollDecision(
        action=McpTaskPollAction.PENDING,
        continuation=continuation,
        poll_interval_seconds=next_mcp_task_poll_interval(previous_seconds, task.poll_interval_ms),
    )


def _in_answer_window(continuation: McpTaskContinuation, now: datetime) -> bool:
    return continuation.sent_at is not None and now - continuation.sent_at < ANSWER_WINDOW


def decide_mcp_task_poll(
    task: McpTask,
    *,
    continuation: McpTaskContinuation,
    pending_answer: QuestionAnswer | None,
    attempt: int,
    effect: ToolEffect,
    previous_seconds: int | None,
    now: datetime,
    uploads_images: bool = True,
) -> McpTaskPollDecision:
    """Decide one ``PollToolTask`` poll of ``task`` (see the module docstring).

    ``pending_answer`` is the resolution of the question this ``continuation``
    names, on the first poll after it and that poll's retries. Its answer is sent
    only while the task lists that same request, and only on ``attempt`` 1: a
    retry cannot tell whether the first attempt sent it, so it asks again.
    ``uploads_images`` tells whether a completed result's images reach a media store.
    """
    if pending_answer is not None and continuation.lists_same_request(task):
        key = continuation.request_key or ""
        if attempt == 1:
            question = map_mcp_input_request({key: task.input_requests[key]})
            if question is not None:
                return McpTaskPollDecision(
                    action=McpTaskPollAction.SEND_THEN_PENDING,
                    continuation=attrs.evolve(
                        continuation,
                        status=task.status,
                        sent_at=now,
                        declined=pending_answer.resolution is not QuestionResolution.ANSWERED,
                    ),
                    poll_interval_seconds=ANSWER_WINDOW_POLL_SECONDS,
                    question=question,
                    input_response=mcp_input_response(question, pending_answer),
                )
        continuation = McpTaskContinuation()  # ask again: the identical request is a new question
    # A decline is kept until the task ends or asks again, so a task cancelled after
    # some working polls is still recorded by its effect, as one cancelled at once is.
    status = McpTaskContinuation(status=task.status, declined=continuation.declined)
    if task.status.is_terminal:
        if continuation.declined and task.status is McpTaskStatus.CANCELLED:
            text = "the MCP task was cancelled after the user declined its input request"
            return McpTaskPollDecision(
                action=McpTaskPollAction.FINISH, outcome=lost_task_outcome(effect, text)
            )
        return McpTaskPollDecision(
            action=McpTaskPollAction.FINISH,
            outcome=terminal_task_outcome(task, uploads_images=uploads_images),
        )
    if task.status is McpTaskStatus.WORKING or not task.input_requests:
        if _in_answer_window(continuation, now) and task.status is McpTaskStatus.INPUT_REQUIRED:
            return attrs.evolve(
                _pending(task, previous_seconds, continuation),
                poll_interval_seconds=ANSWER_WINDOW_POLL_SECONDS,
            )
        return _pending(task, previous_seconds, status)
    if continuation.lists_same_request(task) and _in_answer_window(continuation, now):
        # The task may not have taken the answer in yet.
        return McpTaskPollDecision(
            action=McpTaskPollAction.PENDING,
            continuation=attrs.evolve(continuation, status=task.status),
            poll_interval_seconds=ANSWER_WINDOW_POLL_SECONDS,
        )
    question = map_mcp_input_request(task.input_requests)
    if question is None:
        return McpTaskPollDecision(
            action=McpTaskPollAction.CANCEL_THEN_FINISH,
            outcome=McpCallOutcome(
                kind=McpCallOutcomeKind.FAILED,
                text=mcp_unanswerable_input_text(task.input_requests),
            ),
        )
    return McpTaskPollDecision(
        action=McpTaskPollAction.ASK,
        continuation=McpTaskContinuation(
            status=task.status, request_key=question.request_key, fingerprint=question.fingerprint
        ),
        question=question,
    )
