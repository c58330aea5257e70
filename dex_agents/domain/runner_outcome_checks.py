"""The session's checks of what a runner returns, before anything of it is stored.

Each ``check_*`` function takes one value of ``runner_outcomes`` and raises
``TypeError`` for a field of the wrong type and ``ValueError`` for a value that
breaks the spec's rules for it; the session calls them in the Step that receives
the value, so a bad value fails that model call or tool attempt, never the
session.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from dex_agents.domain.arguments import require_instance, require_optional_int
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolOutcome,
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
from dex_agents.domain.tool_effects import ToolPolicy
from dex_agents.domain.turns import validate_tool_call_ids
from dex_agents.domain.usage import check_model_call_usage

# RunModel stores these values as they are (messages, records, interrupts, run state),
# and one with a field of the wrong type does not decode: DeferredToolCall(arguments=
# {...}) or FrameworkMessage(framework_item={...}) made every later read of the session
# fail. A TypeError naming the field fails the model call instead, before any commit.
_TEXT_OR_NONE = (str, type(None))
_MESSAGE_TEXT_FIELDS = ("text", "tool_call_id", "tool_name", "tool_arguments", "tool_output")


def _check_message_fields(message: FrameworkMessage) -> None:
    item = message.framework_item
    require_instance("FrameworkMessage", "framework_item", item, str, "a str")
    for name in _MESSAGE_TEXT_FIELDS:
        value = getattr(message, name)
        require_instance("FrameworkMessage", name, value, _TEXT_OR_NONE, "a str or None")


def _check_new_messages(where: str, messages: Iterable[object]) -> None:
    for message in messages:
        require_instance(
            where, "new_messages", message, FrameworkMessage, "FrameworkMessage values"
        )
        assert isinstance(message, FrameworkMessage)
        _check_message_fields(message)


def _check_deferred_call(call: object) -> None:
    where = "DeferredToolCall"
    require_instance(
        "ToolCallsRequested", "tool_calls", call, DeferredToolCall, "DeferredToolCall values"
    )
    assert isinstance(call, DeferredToolCall)
    require_instance(where, "tool_call_id", call.tool_call_id, str, "a str")
    require_instance(where, "tool_name", call.tool_name, str, "a str")
    require_instance(where, "arguments", call.arguments, str, "JSON text (a str)")
    require_instance(where, "policy", call.policy, ToolPolicy, "a ToolPolicy")
    for name in ("tool_source_reference", "runner_tool_state"):
        require_instance(where, name, getattr(call, name), _TEXT_OR_NONE, "a str or None")
    require_instance(where, "ordered", call.ordered, bool, "a bool")


def _check_run_state(where: str, framework_run_state: object) -> None:
    require_instance(where, "framework_run_state", framework_run_state, str, "a str")
    if not framework_run_state:
        raise ValueError(f"{where}.framework_run_state must be non-empty")


def check_tool_calls_requested(
    outcome: ToolCallsRequested, *, recorded_tool_call_ids: Collection[str] = ()
) -> None:
    """Refuse a ``ToolCallsRequested`` that breaks the runner contract.

    ``framework_run_state`` must be non-empty text, there must be at least one call, and
    each tool call ID must be non-empty, contain no ``/``, and be unique within the
    turn: across this outcome and ``recorded_tool_call_ids``, the IDs the turn
    already recorded. A bad ID raises ``InvalidToolCallIdError``, a ``ValueError``; a
    field of the wrong type (``arguments`` that are not JSON text) a ``TypeError``.
    """
    _check_run_state("ToolCallsRequested", outcome.framework_run_state)
    if not outcome.tool_calls:
        raise ValueError("ToolCallsRequested.tool_calls must hold at least one tool call")
    for call in outcome.tool_calls:
        _check_deferred_call(call)
    _check_new_messages("ToolCallsRequested", outcome.new_messages)
    validate_tool_call_ids(
        (call.tool_call_id for call in outcome.tool_calls), recorded_tool_call_ids
    )


def check_turn_continued(outcome: TurnContinued) -> None:
    """Refuse a ``TurnContinued`` whose ``framework_run_state`` is empty, or with a field
    of the wrong type (``TypeError``)."""
    _check_run_state("TurnContinued", outcome.framework_run_state)
    _check_new_messages("TurnContinued", outcome.new_messages)


def check_turn_completed(outcome: TurnCompleted) -> None:
    """Refuse a ``TurnCompleted`` whose ``turn_error`` is set but blank, or with a field of
    the wrong type (``TypeError``)."""
    _check_new_messages("TurnCompleted", outcome.new_messages)
    error = outcome.turn_error
    require_instance("TurnCompleted", "turn_error", error, _TEXT_OR_NONE, "a str or None")
    if error is not None and not error.strip():
        raise ValueError("TurnCompleted.turn_error must be None or non-blank text")


def check_agent_turn_outcome(
    outcome: object, *, recorded_tool_call_ids: Collection[str] = ()
) -> AgentTurnOutcome:
    """Return ``outcome`` when it is a valid ``AgentTurnOutcome``; raise otherwise.

    Anything but ``TurnCompleted``, ``ToolCallsRequested`` or ``TurnContinued`` is a
    ``TypeError``, and so is a ``usage`` that ``check_model_call_usage`` refuses; a
    value that breaks its rules a ``ValueError``.
    """
    if isinstance(outcome, TurnCompleted):
        check_turn_completed(outcome)
    elif isinstance(outcome, ToolCallsRequested):
        check_tool_calls_requested(outcome, recorded_tool_call_ids=recorded_tool_call_ids)
    elif isinstance(outcome, TurnContinued):
        check_turn_continued(outcome)
    else:
        raise TypeError(
            "run_model_step must return TurnCompleted, ToolCallsRequested or TurnContinued, "
            f"not {type(outcome).__name__}"
        )
    check_model_call_usage(outcome.usage, f"{type(outcome).__name__}.usage")
    return outcome


def check_user_message(message: object) -> FrameworkMessage:
    """Return what ``build_user_message`` built when it is a ``user`` ``FrameworkMessage``."""
    if not isinstance(message, FrameworkMessage):
        raise TypeError(
            f"build_user_message must return a FrameworkMessage, not {type(message).__name__}"
        )
    if message.role is not MessageRole.USER:
        raise ValueError(
            f"build_user_message must return a message with role user, not {message.role}"
        )
    _check_message_fields(message)  # a field of the wrong type would not decode once stored
    return message


# The session stores these fields on the call's record as they are, and a record with a
# field of the wrong type does not decode: before these checks, ToolExecutionResult(5) or
# ToolInputRequested(allows_free_text="no") made every later read of the session fail.


def check_tool_execution_result(outcome: ToolExecutionResult) -> None:
    """Refuse a result whose ``output`` is not a ``str`` or whose ``truncated_output_bytes``
    is not an ``int`` or ``None`` (``TypeError``), or is negative (``ValueError``)."""
    where = "ToolExecutionResult"
    require_instance(where, "output", outcome.output, str, "a str")
    # A str or a bool (an int to isinstance) made every later read of the session fail.
    size = require_optional_int(where, "truncated_output_bytes", outcome.truncated_output_bytes)
    if size is not None and size < 0:
        raise ValueError(f"{where}.truncated_output_bytes must be None or at least 0, not {size}")


def check_tool_input_requested(outcome: ToolInputRequested) -> None:
    """Refuse a question with a field of the wrong type (``TypeError``), with blank text,
    or one that no answer could satisfy."""
    where = "ToolInputRequested"
    require_instance(where, "question", outcome.question, str, "a str")
    for choice in outcome.choices:
        require_instance(where, "choices", choice, str, "str values")
    require_instance(where, "allows_free_text", outcome.allows_free_text, bool, "a bool")
    require_instance(where, "continuation", outcome.continuation, _TEXT_OR_NONE, "a str or None")
    if not outcome.question.strip():
        raise ValueError("ToolInputRequested.question must be non-blank")
    if not outcome.allows_free_text and not outcome.choices:
        raise ValueError("ToolInputRequested without free text needs at least one choice")
    if not outcome.allows_free_text and not any(choice.strip() for choice in outcome.choices):
        # answer_question refuses a blank answer, so only a decline or the deadline could
        # end such a question.
        raise ValueError(
            "ToolInputRequested without free text needs a non-blank choice: every choice is blank"
        )


def check_tool_task_started(outcome: ToolTaskStarted) -> None:
    """Refuse a ``ToolTaskStarted`` without a ``str`` task ID or with a NaN interval."""
    require_instance("ToolTaskStarted", "task_id", outcome.task_id, str, "a str")
    if not outcome.task_id:
        raise ValueError("ToolTaskStarted.task_id must be non-empty")
    task_poll_seconds(outcome.poll_interval_seconds)


def check_tool_task_pending(outcome: ToolTaskPending) -> None:
    """Refuse a ``ToolTaskPending`` with a NaN interval or a ``continuation`` that is no text."""
    task_poll_seconds(outcome.poll_interval_seconds)
    where = "ToolTaskPending"
    require_instance(where, "continuation", outcome.continuation, _TEXT_OR_NONE, "a str or None")


def check_deferred_tool_outcome(outcome: object) -> DeferredToolOutcome:
    """Return ``outcome`` when it is a valid ``DeferredToolOutcome``; raise otherwise."""
    if isinstance(outcome, ToolInputRequested):
        check_tool_input_requested(outcome)
    elif isinstance(outcome, ToolTaskStarted):
        check_tool_task_started(outcome)
    elif isinstance(outcome, ToolExecutionResult):
        check_tool_execution_result(outcome)
    else:
        raise TypeError(
            "execute_deferred_tool_call must return ToolExecutionResult, ToolInputRequested "
            f"or ToolTaskStarted, not {type(outcome).__name__}"
        )
    return outcome


def check_tool_task_poll_outcome(outcome: object) -> ToolTaskPollOutcome:
    """Return ``outcome`` when it is a valid ``ToolTaskPollOutcome``; raise otherwise."""
    if isinstance(outcome, ToolInputRequested):
        check_tool_input_requested(outcome)
    elif isinstance(outcome, ToolTaskPending):
        check_tool_task_pending(outcome)
    elif isinstance(outcome, ToolExecutionResult):
        check_tool_execution_result(outcome)
    else:
        raise TypeError(
            "poll_tool_task must return ToolExecutionResult, ToolTaskPending or "
            f"ToolInputRequested, not {type(outcome).__name__}"
        )
    return outcome
