"""What a runner returns to the session: the value types of the runner contract.

``run_model_step`` returns an ``AgentTurnOutcome``; ``execute_deferred_tool_call`` a
``DeferredToolOutcome``; ``poll_tool_task`` a ``ToolTaskPollOutcome``;
``summarize_context`` a ``ContextSummaryResult``. Every value here round-trips
through ``dex_agents.domain.wire``; the rules the spec states about them live in
the ``check_*`` functions of ``runner_outcome_checks``, not in validators, so a
stored value always decodes.
The types that the spec writes positionally (``ToolExecutionResult(output)``,
``ToolCallsRequested(framework_run_state, tool_calls, usage)`` ...) take those
fields positionally too, in the spec's order; the rest are keyword-only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeAlias

import attrs

from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import FrameworkMessage, image_tuple
from dex_agents.domain.tool_effects import ToolPolicy
from dex_agents.domain.usage import AgentUsage

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
    Tool call IDs must be non-empty, hold no ``/`` and be unique within the turn;
    later turns may reuse them. ``new_messages`` lets a runner store items as they
    appear; the session appends them in the commit that records the tool calls. Such
    a runner implements ``build_unfinished_turn_messages``, or its turn fails after
    this model call, without a retry.
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
    """Make another model call in the same turn, after storing ``new_messages``.

    End ``new_messages`` with a user message when the provider needs the request to
    end with one. A runner that continues turns implements
    ``build_unfinished_turn_messages``.
    """

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
    """The whole seconds ``PollToolTask`` waits: ``interval`` rounded up, from 1 to a day.

    ``TypeError`` for anything but an ``int`` or a ``float`` (a ``bool`` included),
    ``ValueError`` for NaN.
    """
    # math.isnan(None) said only "must be real number, not NoneType", and
    # math.isnan(10**400) raised OverflowError for an int the rule clamps to a day.
    if isinstance(interval, bool) or not isinstance(interval, int | float):
        raise TypeError(
            f"poll_interval_seconds must be a number of seconds (an int or a float), "
            f"not {type(interval).__name__}"
        )
    if isinstance(interval, float) and math.isnan(interval):
        raise ValueError("poll_interval_seconds must be a number, not NaN")
    clamped = min(max(interval, MIN_TASK_POLL_SECONDS), MAX_TASK_POLL_SECONDS)
    return math.ceil(clamped)
