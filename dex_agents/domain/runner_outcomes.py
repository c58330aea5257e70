"""What a runner returns to the session: the value types of the runner contract.

``run_model_step`` returns an ``AgentTurnOutcome``; ``execute_deferred_tool_call`` a
``DeferredToolOutcome``; ``poll_tool_task`` a ``ToolTaskPollOutcome``;
``summarize_context`` a ``ContextSummaryResult``. Every value here round-trips
through ``dex_agents.domain.wire``; the rules the spec states about them live in
the ``check_*`` functions, not in validators, so a stored value always decodes.
The types that the spec writes positionally (``ToolExecutionResult(output)``,
``ToolCallsRequested(framework_run_state, tool_calls, usage)`` ...) take those
fields positionally too, in the spec's order; the rest are keyword-only.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import TypeAlias

import attrs

from dex_agents.domain.arguments import require_instance
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import FrameworkMessage, MessageRole, image_tuple
from dex_agents.domain.tool_effects import ToolPolicy
from dex_agents.domain.turns import validate_tool_call_ids
from dex_agents.domain.usage import AgentUsage, check_model_call_usage

MIN_TASK_POLL_SECONDS = 1
"""The shortest wait before a tool task's next poll: one second."""

MAX_TASK_POLL_SECONDS = 24 * 60 * 60
"""The longest wait before a tool task's next poll: one day."""


def _text_tuple(value: Iterable[str]) -> tuple[str, ...]:
    # A bare string is iterable too; splitting it into characters is never meant.
    if isinstance(value, str):
        raise TypeError(f"expected a sequence of strings, not the string {value!r}")
    return tuple(value)


def _optional_text_tuple(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else _text_tuple(value)


def _message_tuple(value: Iterable[FrameworkMessage]) -> tuple[FrameworkMessage, ...]:
    return tuple(value)


def _deferred_call_tuple(value: Iterable[DeferredToolCall]) -> tuple[DeferredToolCall, ...]:
    return tuple(value)


@attrs.frozen
class ModelCallMetadata:
    """What the framework reports about one model call; it names the ``chat`` span.

    The session never stores it. Leave a field ``None`` when the framework does not
    expose it. ``request_model`` names the span ``chat {request_model}``.
    """

    request_model: str | None = None
    response_model: str | None = None
    provider_name: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] | None = attrs.field(
        default=None, converter=_optional_text_tuple
    )


@attrs.frozen
class DeferredToolCall:
    """One tool call the model asked for, which the session runs in its own tool Step.

    ``arguments`` is the model's JSON text, kept unchanged. Get ``policy`` from
    ``turn.resolve_tool_policy(name, framework_effect)``. ``tool_source_reference``
    is opaque text stored on the call's ``AgentToolCall`` record, so the tool's
    source resolves the tool in the tool Step without listing it again.
    ``ordered`` writes of one response run one at a time in model order.
    ``runner_tool_state`` is opaque text the runner gets back on the record.
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    policy: ToolPolicy
    tool_source_reference: str | None = attrs.field(default=None, kw_only=True)
    ordered: bool = attrs.field(default=False, kw_only=True)
    runner_tool_state: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class TurnCompleted:
    """The model gave its final answer: the turn ends.

    ``new_messages`` are the turn's items the session has not stored yet, in order;
    the session appends them in one commit. ``usage`` is this model call's only.
    With ``turn_error``, the turn ends as failed without a retry and the session
    sets ``last_turn_error`` to that text.
    """

    new_messages: tuple[FrameworkMessage, ...] = attrs.field(converter=_message_tuple)
    usage: AgentUsage
    model_call_metadata: ModelCallMetadata | None = attrs.field(default=None, kw_only=True)
    turn_error: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class ToolCallsRequested:
    """The model asked for tools: one ``DeferredToolCall`` per call, in model order.

    ``framework_run_state`` must be non-empty and continue the turn after the tools.
    ``new_messages`` lets a runner store items as they appear; the session appends
    them in the commit that records the tool calls.
    """

    framework_run_state: str
    tool_calls: tuple[DeferredToolCall, ...] = attrs.field(converter=_deferred_call_tuple)
    usage: AgentUsage
    new_messages: tuple[FrameworkMessage, ...] = attrs.field(
        default=(), converter=_message_tuple, kw_only=True
    )
    model_call_metadata: ModelCallMetadata | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class TurnContinued:
    """Make another model call in the same turn, after storing ``new_messages``."""

    framework_run_state: str
    new_messages: tuple[FrameworkMessage, ...] = attrs.field(converter=_message_tuple)
    usage: AgentUsage
    model_call_metadata: ModelCallMetadata | None = attrs.field(default=None, kw_only=True)


AgentTurnOutcome: TypeAlias = TurnCompleted | ToolCallsRequested | TurnContinued
"""What ``run_model_step`` returns."""


@attrs.frozen
class ToolExecutionResult:
    """A tool's result: ``output`` is what the model sees; ``images`` are references.

    ``truncated_output_bytes`` is the full size, in bytes, of an ``output`` the tool
    cut (a connector result over ``max_result_bytes``); the session stores it as
    ``AgentToolCall.truncated_output_bytes``. ``None`` means nothing was cut.
    """

    output: str
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)
    truncated_output_bytes: int | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class ToolInputRequested:
    """The tool needs an answer from the user before it takes any effect.

    ``continuation`` is opaque text the tool reads back as
    ``tool_call.input_continuation`` when it runs or polls again.
    """

    question: str
    choices: tuple[str, ...] = attrs.field(default=(), converter=_text_tuple)
    allows_free_text: bool = True
    continuation: str | None = None


@attrs.frozen
class ToolTaskStarted:
    """The tool started remote work that the session polls with ``poll_tool_task``."""

    task_id: str
    poll_interval_seconds: float


@attrs.frozen
class ToolTaskPending:
    """The task still runs: poll again after ``poll_interval_seconds``.

    ``continuation`` is stored as the record's ``input_continuation``; ``None``
    clears it.
    """

    poll_interval_seconds: float
    continuation: str | None = None


DeferredToolOutcome: TypeAlias = ToolExecutionResult | ToolInputRequested | ToolTaskStarted
"""What ``execute_deferred_tool_call`` returns.

The spec's sentence lists ``ToolExecutionResult | ToolInputRequested``; tool tasks
add ``ToolTaskStarted``, which a runner implementing
``AgentFrameworkRunner[DeferredToolOutcome]`` returns (see "Tool tasks").
"""

ToolTaskPollOutcome: TypeAlias = ToolExecutionResult | ToolTaskPending | ToolInputRequested
"""What ``poll_tool_task`` returns."""


@attrs.frozen(kw_only=True)
class ContextSummaryResult:
    """What ``summarize_context`` returns: the summary ``text`` and the call's ``usage``."""

    text: str
    usage: AgentUsage
    model_call_metadata: ModelCallMetadata | None = None


def task_poll_seconds(interval: float) -> int:
    """The whole seconds ``PollToolTask`` waits: ``interval`` rounded up, from 1 to a day."""
    if math.isnan(interval):
        raise ValueError("poll_interval_seconds must be a number, not NaN")
    clamped = min(max(interval, MIN_TASK_POLL_SECONDS), MAX_TASK_POLL_SECONDS)
    return math.ceil(clamped)


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
    """Refuse a result whose ``output`` is not a ``str`` (``TypeError``)."""
    require_instance("ToolExecutionResult", "output", outcome.output, str, "a str")


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
