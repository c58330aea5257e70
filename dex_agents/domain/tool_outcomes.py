"""How a tool call's record becomes final, and what the model reads for it.

Each ``record_*`` function takes the call's current ``AgentToolCall`` and returns
the record its Step commits. A record that is already final comes back
unchanged, so a Step that finds it final ends without publishing
``ToolCallResults`` ("every tool call publishes exactly one ``ToolCallResults``
message"). ``describe_tool_call_outcome`` renders the text the model reads for a
final record, and ``build_turn_failure_note`` the note ``RecordTurnFailure``
stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from dex_agents.domain.errors import ToolExecutionError, ToolOutcomeUnknownError
from dex_agents.domain.images import validate_image_references
from dex_agents.domain.runner_outcomes import ToolExecutionResult
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import tool_failure_status

TOOL_CALL_NOT_RUN_ERROR_PREFIX = "the tool did not run, so it is safe to call again"
"""How the ``error`` of a call whose tool never ran starts; then ``": "`` and the detail."""

OUTCOME_UNKNOWN_TOOL_RESULT = (
    "The outcome of this tool call is unknown: it may or may not have taken effect. "
    "Do not call it again blindly; check whether it took effect first, or ask the user."
)
"""What the model reads for an ``outcome_unknown`` call, and for a stored call with no result."""

MISSING_TOOL_TASK_POLLER = (
    "the tool started a task, but the runner cannot poll tool tasks: "
    "it does not implement ToolTaskPoller.poll_tool_task"
)
"""The ``error`` of a call whose tool returned ``ToolTaskStarted`` to a runner without ``poll_tool_task``."""

TOOL_CALL_FAILED_RESULT_PREFIX = "The tool call failed: "
"""What the model reads before a ``failed`` call's ``error``."""

TOOL_CALL_REJECTED_RESULT = "The tool call was not approved, so it did not run."
"""What the model reads for a ``rejected`` call without a ``rejection_message``."""

STEERED_TOOL_RESULT = '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'
"""What the model reads for a call that had not started when the user steered the turn."""

TURN_CANCELLED_TOOL_RESULT = '{"status":"cancelled","reason":"turn_cancelled_by_user"}'
"""What the model reads for a call that had not started when the user cancelled the turn."""

CANCELLED_TOOL_RESULTS: Mapping[CancellationReason, str] = {
    CancellationReason.STEERED: STEERED_TOOL_RESULT,
    CancellationReason.TURN_CANCELLED: TURN_CANCELLED_TOOL_RESULT,
}
"""The model's result for a ``rejected`` call, by its ``cancellation_reason``."""

TURN_FAILURE_NOTE_HEADER = "[Dex] The previous turn failed after these tool calls ran:"
"""The first line of the turn-failure note."""

TURN_FAILURE_NOTE_FOOTER = "Do not repeat these tool calls unless the user asks again."
"""The last line of the turn-failure note."""


def not_run_error(detail: str) -> str:
    """The ``error`` of a call whose tool never ran: ``TOOL_CALL_NOT_RUN_ERROR_PREFIX: <detail>``."""
    return f"{TOOL_CALL_NOT_RUN_ERROR_PREFIX}: {detail}"


def describe_tool_call_outcome(record: AgentToolCall) -> str:
    """The text the model reads as the result of a final tool call record.

    ``succeeded`` gives the output (empty without one); ``failed`` gives ``The
    tool call failed: <error>`` (``unknown error`` without one); ``outcome_unknown`` gives ``OUTCOME_UNKNOWN_TOOL_RESULT``;
    ``rejected`` gives the cancelled result of its ``cancellation_reason``, else
    its ``rejection_message``, else ``TOOL_CALL_REJECTED_RESULT``. A record that
    is not final has no outcome yet, and raises ``ValueError``.
    """
    status = record.status
    if status is ToolCallStatus.SUCCEEDED:
        return record.output or ""
    if status is ToolCallStatus.FAILED:
        return TOOL_CALL_FAILED_RESULT_PREFIX + (record.error or "unknown error")
    if status is ToolCallStatus.OUTCOME_UNKNOWN:
        return OUTCOME_UNKNOWN_TOOL_RESULT
    if status is ToolCallStatus.REJECTED:
        if record.cancellation_reason is not None:
            return CANCELLED_TOOL_RESULTS[record.cancellation_reason]
        if record.rejection_message and record.rejection_message.strip():
            return record.rejection_message
        return TOOL_CALL_REJECTED_RESULT
    raise ValueError(
        f"tool call {record.tool_call_id!r} is {status.value}, not final, so it has no outcome yet"
    )


def has_run_before(record: AgentToolCall) -> bool:
    """Whether the call's tool already ran in an earlier Step.

    A tool that asked a question (``input_request_count`` > 0) or started a task
    (``task_id``) ran, so a later failure keeps the status of its effect even when
    the failing attempt itself never started.
    """
    return record.input_request_count > 0 or record.task_id is not None


def _recover(
    record: AgentToolCall, detail: str, never_started: bool, status: ToolCallStatus
) -> AgentToolCall:
    if record.is_final:
        return record
    # A call still awaiting approval never reached its tool Step: its approval failed.
    never_ran = never_started or record.status is ToolCallStatus.AWAITING_APPROVAL
    if never_ran and not has_run_before(record):
        return attrs.evolve(record, status=ToolCallStatus.FAILED, error=not_run_error(detail))
    return attrs.evolve(record, status=status, error=detail)


def record_tool_failure(record: AgentToolCall, detail: str, never_started: bool) -> AgentToolCall:
    """The record ``RecordToolFailure`` commits after a ``CallTool`` or ``PollToolTask`` failed.

    ``failed`` for a read and ``outcome_unknown`` for a write, with the recovery
    ``detail`` as ``error``. When ``never_started`` (``attempt_progress``
    ``NOT_STARTED``) and the tool never ran before, or the call still awaits its
    approval (``AwaitToolApproval`` failed), ``failed`` with
    ``TOOL_CALL_NOT_RUN_ERROR_PREFIX: <detail>``, so the model may call it again.
    """
    return _recover(record, detail, never_started, tool_failure_status(record.effect))


def record_tool_outcome_unknown(
    record: AgentToolCall, detail: str, never_started: bool
) -> AgentToolCall:
    """The record ``RecordToolOutcomeUnknown`` commits after a single-attempt Step failed.

    ``outcome_unknown`` with the recovery ``detail`` as ``error``. When
    ``never_started`` and the tool never ran before, or the call still awaits its
    approval, ``failed`` with ``TOOL_CALL_NOT_RUN_ERROR_PREFIX: <detail>``.
    """
    return _recover(record, detail, never_started, ToolCallStatus.OUTCOME_UNKNOWN)


def record_tool_result(record: AgentToolCall, result: ToolExecutionResult) -> AgentToolCall:
    """The record after the tool or its task returned ``result``: ``succeeded`` with its output.

    The images are checked first (``validate_image_references``): an invalid one
    raises ``ImageValidationError``, which fails the attempt rather than store it.
    """
    if record.is_final:
        return record
    return attrs.evolve(
        record,
        status=ToolCallStatus.SUCCEEDED,
        output=result.output,
        images=validate_image_references(result.images),
        truncated_output_bytes=result.truncated_output_bytes,
    )


def record_tool_error(
    record: AgentToolCall, error: ToolExecutionError | ToolOutcomeUnknownError
) -> AgentToolCall:
    """The record after the tool or its task raised one of the errors the model sees.

    ``ToolExecutionError`` records ``failed`` and ``ToolOutcomeUnknownError``
    records ``outcome_unknown``, each with the error's message; neither is retried.
    """
    if record.is_final:
        return record
    if isinstance(error, ToolExecutionError):
        return attrs.evolve(record, status=ToolCallStatus.FAILED, error=str(error))
    if isinstance(error, ToolOutcomeUnknownError):
        return attrs.evolve(record, status=ToolCallStatus.OUTCOME_UNKNOWN, error=str(error))
    raise TypeError(
        "record_tool_error takes a ToolExecutionError or ToolOutcomeUnknownError, "
        f"not {type(error).__name__}"
    )


def record_missing_tool_task_poller(record: AgentToolCall) -> AgentToolCall:
    """The record when a runner without ``poll_tool_task`` returned ``ToolTaskStarted``.

    ``failed`` for a read and ``outcome_unknown`` otherwise, because the task may
    run, with ``MISSING_TOOL_TASK_POLLER`` as ``error``.
    """
    if record.is_final:
        return record
    return attrs.evolve(
        record, status=tool_failure_status(record.effect), error=MISSING_TOOL_TASK_POLLER
    )


def cancel_unstarted_tool_call(record: AgentToolCall, reason: CancellationReason) -> AgentToolCall:
    """The record of a call that had not started when the user steered or cancelled the turn.

    ``rejected`` with ``cancellation_reason``, including a queued write. A started
    task is never rejected: ``cancel_turn`` abandons it (``abandon_tool_task``),
    so a record with ``task_id`` raises ``ValueError``.
    """
    if record.is_final:
        return record
    if record.task_id is not None:
        raise ValueError(
            f"tool call {record.tool_call_id!r} started task {record.task_id!r}; "
            "a started task is abandoned, never rejected"
        )
    return attrs.evolve(
        record,
        status=ToolCallStatus.REJECTED,
        cancellation_reason=CancellationReason(reason),
        write_queued=False,
    )


def abandon_tool_task(record: AgentToolCall) -> AgentToolCall:
    """The record ``CancelToolTask`` commits for a task that ``cancel_turn`` abandoned.

    ``outcome_unknown`` with ``cancellation_reason`` ``turn_cancelled``, because the
    task may still run. A record without ``task_id`` raises ``ValueError``.
    """
    if record.is_final:
        return record
    if record.task_id is None:
        raise ValueError(f"tool call {record.tool_call_id!r} started no task to abandon")
    return attrs.evolve(
        record,
        status=ToolCallStatus.OUTCOME_UNKNOWN,
        cancellation_reason=CancellationReason.TURN_CANCELLED,
    )


def build_turn_failure_note(records: Iterable[AgentToolCall]) -> str | None:
    """The note ``RecordTurnFailure`` stores so the next turn does not repeat a write.

    One line per final record in ``deferral_order``::

        [Dex] The previous turn failed after these tool calls ran:
        - <tool_name> <arguments> -> <status>: <describe_tool_call_outcome(record)>
        Do not repeat these tool calls unless the user asks again.

    Records that are not final have no outcome and are left out. ``None`` when no
    record is final, because then the turn stores no note.
    """
    final = sorted(
        (record for record in records if record.is_final),
        key=lambda record: (record.deferral_order, record.tool_call_id),
    )
    if not final:
        return None
    lines = [TURN_FAILURE_NOTE_HEADER]
    lines.extend(
        f"- {record.tool_name} {record.arguments} -> {record.status.value}: "
        f"{describe_tool_call_outcome(record)}"
        for record in final
    )
    lines.append(TURN_FAILURE_NOTE_FOOTER)
    return "\n".join(lines)
