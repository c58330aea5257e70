"""Questions of ``ask_user`` calls, of tools and of tool tasks: how each one changes the record.

``AwaitQuestionAnswer`` raises a question and waits for it; these rules say what
its interrupt ID is and which record each resolution leaves, so the Step only
loads, applies one of them, and commits:

- ``ask_user``: an answer records ``succeeded`` with ``ask_user_answer_output``;
  a decline or a passed deadline records ``rejected`` with
  ``QUESTION_DECLINED_MESSAGE`` or ``QUESTION_DEADLINE_PASSED_MESSAGE``, which
  the model reads as the result.
- A tool's own question (before any effect): an answer returns the call
  ``approved`` with the answer appended to ``input_answers``, so its tool Step
  runs again; a decline or a passed deadline ends it ``rejected`` like
  ``ask_user``.
- A task's question: the task has started, so every resolution returns the call
  to ``waiting_for_task`` with the answer pending for the next poll, and one that
  cannot be raised (its interrupt ID is in use) ends the call by its effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from dex_agents.domain.builtin_tools import (
    QUESTION_DEADLINE_PASSED_MESSAGE,
    QUESTION_DECLINED_MESSAGE,
    ask_user_answer_output,
)
from dex_agents.domain.interrupts import QuestionAnswer, QuestionResolution
from dex_agents.domain.runner_outcomes import (
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskStarted,
    task_poll_seconds,
)
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import tool_failure_status

QUESTION_RESOLUTION_MESSAGES: Mapping[QuestionResolution, str] = MappingProxyType(
    {
        QuestionResolution.DECLINED: QUESTION_DECLINED_MESSAGE,
        QuestionResolution.DEADLINE_PASSED: QUESTION_DEADLINE_PASSED_MESSAGE,
    }
)
"""What the model reads for a question that ended without an answer, by its resolution."""


def tool_question_interrupt_id(tool_call_id: str, request_number: int) -> str:
    """The interrupt ID of a tool's ``request_number``-th question: ``<tool_call_id>-input-<n>``."""
    return f"{tool_call_id}-input-{request_number}"


def question_interrupt_id(record: AgentToolCall) -> str:
    """The interrupt ID a call's question is raised with.

    An ``ask_user`` call's (a built-in) is its tool call ID; a tool's or a task's
    question is ``<tool_call_id>-input-<input_request_count>``.
    """
    if record.built_in:
        return record.tool_call_id
    return tool_question_interrupt_id(record.tool_call_id, record.input_request_count)


def interrupt_id_in_use_error(interrupt_id: str) -> str:
    """The ``error`` of a call whose tool asked under an interrupt ID that is already in use."""
    return (
        f"the tool asked a question, but its interrupt ID {interrupt_id} is already used "
        "by another tool call or interrupt of this turn"
    )


def refuse_question_in_use(record: AgentToolCall, interrupt_id: str) -> AgentToolCall:
    """The final record of a call whose question's interrupt ID is already in use.

    A tool's own question comes before any effect, so the call records ``failed``.
    A task's question comes after the task started, so the call records what a
    started call that failed records: ``failed`` for a read, ``outcome_unknown``
    for a write, which the task may still carry out.
    """
    status = ToolCallStatus.FAILED
    if record.task_id is not None:
        status = tool_failure_status(record.effect)
    return attrs.evolve(record, status=status, error=interrupt_id_in_use_error(interrupt_id))


def is_question_raised(record: AgentToolCall) -> bool:
    """Whether the call's question interrupt is raised and not yet resolved."""
    return record.status is ToolCallStatus.AWAITING_ANSWER and record.interrupt_id is not None


def ask_tool_question(record: AgentToolCall, question: ToolInputRequested) -> AgentToolCall:
    """The record of a call whose tool (or task) asked ``question``; not raised yet.

    ``awaiting_answer`` with the question, ``input_request_count`` + 1, and the
    question's ``continuation`` as ``input_continuation``.
    """
    return attrs.evolve(
        record,
        status=ToolCallStatus.AWAITING_ANSWER,
        interrupt_id=None,
        question=question.question,
        choices=tuple(question.choices),
        allows_free_text=question.allows_free_text,
        input_request_count=record.input_request_count + 1,
        input_continuation=question.continuation,
        task_answer_pending=False,
        rejection_message=None,
    )


def raise_question(
    record: AgentToolCall,
    interrupt_id: str,
    *,
    question: str | None,
    choices: tuple[str, ...],
    allows_free_text: bool,
) -> AgentToolCall:
    """The record once its question interrupt ``interrupt_id`` is pending."""
    return attrs.evolve(
        record,
        status=ToolCallStatus.AWAITING_ANSWER,
        interrupt_id=interrupt_id,
        question=question,
        choices=choices,
        allows_free_text=allows_free_text,
    )


def settle_question(record: AgentToolCall, answer: QuestionAnswer) -> AgentToolCall:
    """The record after its question ended with ``answer`` (see the module's rules).

    The result is final for ``ask_user`` and for a tool question that was not
    answered; ``approved`` for an answered tool question; ``waiting_for_task``
    for a task's question.
    """
    answered = answer.resolution is QuestionResolution.ANSWERED
    text = answer.answer or ""
    if record.task_id is not None:
        return with_task_answer(record, answer)
    if not answered:
        return attrs.evolve(
            record,
            status=ToolCallStatus.REJECTED,
            rejection_message=QUESTION_RESOLUTION_MESSAGES[answer.resolution],
        )
    if record.built_in:
        return attrs.evolve(
            record, status=ToolCallStatus.SUCCEEDED, output=ask_user_answer_output(text)
        )
    return attrs.evolve(
        record, status=ToolCallStatus.APPROVED, input_answers=(*record.input_answers, text)
    )


def with_task_answer(record: AgentToolCall, answer: QuestionAnswer) -> AgentToolCall:
    """A task's record whose question ended: ``waiting_for_task``, the answer pending.

    The answer lives in the record, so a retried poll reads it again: an answer
    is appended to ``input_answers``; a decline or a passed deadline is kept as
    ``rejection_message`` until the poll that hands it over commits.
    """
    answers = record.input_answers
    if answer.resolution is QuestionResolution.ANSWERED:
        answers = (*answers, answer.answer or "")
    return attrs.evolve(
        record,
        status=ToolCallStatus.WAITING_FOR_TASK,
        task_answer_pending=True,
        input_answers=answers,
        rejection_message=QUESTION_RESOLUTION_MESSAGES.get(answer.resolution),
    )


def pending_task_answer(record: AgentToolCall) -> QuestionAnswer | None:
    """The ``pending_answer`` of the first poll after a task's question (and its retries)."""
    if not record.task_answer_pending:
        return None
    for resolution, message in QUESTION_RESOLUTION_MESSAGES.items():
        if record.rejection_message == message:
            return QuestionAnswer(resolution=resolution)
    answer = record.input_answers[-1] if record.input_answers else ""
    return QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer=answer)


def hand_over_task_answer(record: AgentToolCall) -> AgentToolCall:
    """The record once a poll that received its pending answer commits."""
    if not record.task_answer_pending:
        return record
    return attrs.evolve(record, task_answer_pending=False, rejection_message=None)


def start_tool_task(record: AgentToolCall, started: ToolTaskStarted) -> AgentToolCall:
    """The record of a call whose tool started a task: ``waiting_for_task``.

    ``task_poll_interval_seconds`` is the interval rounded up to whole seconds
    from 1 to a day.
    """
    return attrs.evolve(
        record,
        status=ToolCallStatus.WAITING_FOR_TASK,
        task_id=started.task_id,
        task_poll_interval_seconds=task_poll_seconds(started.poll_interval_seconds),
        task_answer_pending=False,
    )


def keep_polling(record: AgentToolCall, pending: ToolTaskPending) -> AgentToolCall:
    """The record after a poll said the task still runs: the next interval and continuation.

    ``continuation`` replaces ``input_continuation``; ``None`` clears it.
    """
    return attrs.evolve(
        record,
        task_poll_interval_seconds=task_poll_seconds(pending.poll_interval_seconds),
        input_continuation=pending.continuation,
    )
