"""The runner contract: what the session hands a runner, and the protocols a runner implements.

The session calls a runner from Steps, so each call may run again after a crash
or a retry. A runner keeps no state between calls and derives everything from
the arguments. ``AgentFrameworkRunner`` is required; the other protocols are
optional, and the session tests for them with ``isinstance``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.context_summary import ContextSummary, ContextSummaryRequest
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.interrupts import QuestionAnswer
from dex_agents.domain.messages import AgentMessage, FrameworkMessage
from dex_agents.domain.plans import AgentPlan
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    ContextSummaryResult,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy, resolve_tool_policy
from dex_agents.domain.tool_step_options import ToolCallStepOptions
from dex_agents.ports.event_writer import AgentEventWriter

Heartbeat = Callable[[], Awaitable[None]]
"""Records liveness of the running Step attempt: ``await heartbeat()``."""

SaveHeartbeatCheckpoint = Callable[[str], Awaitable[None]]
"""Records a heartbeat that carries text, which every later heartbeat of the attempt repeats."""

if TYPE_CHECKING:
    # A type parameter default (PEP 696) makes a bare ``AgentFrameworkRunner`` mean
    # ``AgentFrameworkRunner[ToolExecutionResult]``, as the spec writes it. Python 3.11's
    # TypeVar has no default, and only type checkers need it, so the runtime never
    # imports typing_extensions.
    from typing_extensions import TypeVar

    ToolOutcomeT_co = TypeVar(
        "ToolOutcomeT_co",
        bound=ToolExecutionResult | ToolInputRequested | ToolTaskStarted,
        covariant=True,
        default=ToolExecutionResult,
    )
else:
    from typing import TypeVar

    ToolOutcomeT_co = TypeVar(
        "ToolOutcomeT_co",
        bound=ToolExecutionResult | ToolInputRequested | ToolTaskStarted,
        covariant=True,
    )
"""What a runner's ``execute_deferred_tool_call`` returns; ``ToolExecutionResult`` by default."""


@dataclass(frozen=True, kw_only=True)
class AgentTurnContext:
    """The committed state ``run_model_step`` works from; see "The runner contract".

    ``attempt`` is the one-based ``RunModel`` attempt. ``messages`` are the stored
    messages in sequence order (after ``context_summary`` once the session
    compacts); the last user message belongs to this turn. ``framework_run_state``
    is ``None`` for the turn's first model call, else the value of this turn's last
    ``ToolCallsRequested`` or ``TurnContinued``. ``tool_calls`` holds every record of this turn by tool call
    ID; when ``RunModel`` runs, every record is final. ``events`` is bound to the
    turn, Step execution and attempt, and drops what is written after the call
    returns. ``heartbeat`` records liveness; the session already heartbeats every
    20 seconds in the background. ``enabled_built_in_tools`` are the built-in
    tools to offer, from ``AgentSessionOptions.built_in_tools``. ``session_settings`` is
    the running turn's copy, empty when there are none.
    """

    flow_id: str
    turn_id: str
    attempt: int
    messages: Sequence[AgentMessage]
    events: AgentEventWriter
    heartbeat: Heartbeat
    framework_run_state: str | None = None
    tool_calls: Mapping[str, AgentToolCall] = field(default_factory=dict)
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    enabled_built_in_tools: frozenset[BuiltInTool] = frozenset()
    interaction_mode: InteractionMode = InteractionMode.CHAT
    session_settings: Mapping[str, Any] = field(default_factory=dict)
    context_summary: ContextSummary | None = None
    plan: AgentPlan | None = None

    @property
    def is_resuming(self) -> bool:
        """Whether this model call continues the turn from ``framework_run_state``."""
        return self.framework_run_state is not None

    def recorded_tool_call(self, tool_call_id: str) -> AgentToolCall:
        """The record of one of this turn's tool calls; ``KeyError`` names an unknown ID."""
        try:
            return self.tool_calls[tool_call_id]
        except KeyError:
            raise KeyError(
                f"turn {self.turn_id} has no tool call record {tool_call_id!r}"
            ) from None

    def resolve_tool_policy(
        self, name: str, framework_effect: ToolEffect | None = None
    ) -> ToolPolicy:
        """The policy of a tool: the explicit policy, else framework metadata, else the default.

        Pass ``framework_effect`` when the framework exposes metadata, such as MCP
        ``readOnlyHint`` (``READ``) or ``idempotentHint`` (``IDEMPOTENT_WRITE``).
        """
        return resolve_tool_policy(
            name, self.tool_policies, framework_effect, self.default_tool_effect
        )


@dataclass(frozen=True, kw_only=True)
class DeferredToolExecution:
    """One approved tool call that a tool Step hands ``execute_deferred_tool_call``.

    ``idempotency_key`` is ``"<flow_id>/<turn_id>/<tool_call_id>"``, the same on
    every attempt. ``heartbeat_checkpoint`` is the text an earlier attempt saved
    with ``save_heartbeat_checkpoint``, so a retry can resume work it started.
    ``input_answers`` are the user's answers to the tool's questions, in order, and
    ``tool_call.input_continuation`` the continuation of the last one.
    ``context`` is the tool Step's live engine context (a Dex ``AsyncContext``)
    for the duration of the call, or ``None`` outside an engine.
    ``supports_tool_tasks`` tells a tool whether the runner polls tool tasks.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int
    events: AgentEventWriter
    heartbeat: Heartbeat
    save_heartbeat_checkpoint: SaveHeartbeatCheckpoint
    heartbeat_checkpoint: str | None = None
    input_answers: tuple[str, ...] = ()
    context: Any = None
    supports_tool_tasks: bool = False

    @property
    def turn_id(self) -> str:
        """The turn the call belongs to."""
        return self.tool_call.turn_id

    @property
    def effect(self) -> ToolEffect:
        """The call's effect after the tool policies, which chose its tool Step."""
        return self.tool_call.effect


@dataclass(frozen=True, kw_only=True)
class ToolTaskPoll:
    """One ``PollToolTask`` poll of a call whose record is ``waiting_for_task``.

    ``tool_call.task_id`` names the task. ``pending_answer`` is the resolution of
    the task's last question, only on the poll right after it (and that poll's
    retries); ``tool_call.input_continuation`` is that question's continuation,
    then whatever the last ``ToolTaskPending`` returned.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int
    events: AgentEventWriter
    heartbeat: Heartbeat
    pending_answer: QuestionAnswer | None = None


@dataclass(frozen=True, kw_only=True)
class ToolTaskCancellation:
    """A started task that ``cancel_turn`` abandoned; ``tool_call.task_id`` names it."""

    flow_id: str
    tool_call: AgentToolCall
    attempt: int


@runtime_checkable
class AgentFrameworkRunner(Protocol[ToolOutcomeT_co]):
    """The three methods every runner implements.

    Generic in what ``execute_deferred_tool_call`` returns. A bare
    ``AgentFrameworkRunner`` means ``AgentFrameworkRunner[ToolExecutionResult]`` to
    type checkers, through a type parameter default. A runner whose tools ask the
    user or start tasks implements ``AgentFrameworkRunner[DeferredToolOutcome]``,
    which every narrower runner is assignable to.
    """

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return ``FrameworkMessage(role=MessageRole.USER, framework_item=..., text=text)``.

        The session stores it as the turn's first message, and ``RecordTurnFailure``
        builds the turn-failure note with it. Any other role fails the Step.
        """
        ...

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make at most one model call and stop before any tool the framework can defer.

        Rebuild the input from committed state only: each message's
        ``framework_item``, or the framework from ``turn.framework_run_state`` with
        every tool call answered from its final record. Then return:

        - ``ToolCallsRequested`` when the model asks for tools: one
          ``DeferredToolCall`` per call in model order, each ``policy`` from
          ``turn.resolve_tool_policy``, and a non-empty ``framework_run_state``
          that continues the turn after the tools. Tool call IDs are non-empty,
          hold no ``/`` and are unique within the turn; a later turn may reuse them.
        - ``TurnCompleted`` with the turn's items the session has not stored yet,
          in order; with ``turn_error`` the turn ends failed, without a retry.
        - ``TurnContinued`` for another model call in the same turn.

        A runner that stores items as they appear (``ToolCallsRequested.new_messages``
        or ``TurnContinued``) implements ``UnfinishedTurnMessageBuilder``; one that
        sets ``new_messages`` without it fails its turn after that model call, with
        no retry. Report ``usage`` for this call only. Never run a tool here unless
        the framework cannot defer it; such a tool runs again on a retry. Any
        exception fails the attempt: ``RunModel`` reruns only this call, up to three
        attempts within 30 minutes (``AgentSessionOptions.run_model_limit``), then
        ``RecordTurnFailure`` ends the turn.
        """
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolOutcomeT_co:
        """Run the real tool once and return its outcome.

        Return ``ToolExecutionResult``; ``ToolInputRequested`` only while the call
        has taken no effect; or ``ToolTaskStarted`` for remote work the session
        polls through ``ToolTaskPoller`` (save the handle with
        ``save_heartbeat_checkpoint`` first, and return the saved one when
        ``heartbeat_checkpoint`` holds it). May run concurrently with itself: the
        calls of one response run in parallel Steps. Raise ``ToolExecutionError``
        for a failure the model should see (``failed``) and
        ``ToolOutcomeUnknownError`` for a write whose outcome is unknown
        (``outcome_unknown``); neither is retried. Any other exception is a Step
        failure: a ``read`` or ``idempotent_write`` call retries up to three
        attempts with the same ``idempotency_key``, then records ``failed`` for a
        read and ``outcome_unknown`` for a write; a single-attempt call records
        ``outcome_unknown``.
        """
        ...


@runtime_checkable
class UnfinishedTurnMessageBuilder(Protocol):
    """Optional: the exact transcript of a turn that ends unfinished.

    Required of a runner that stores items as they appear
    (``ToolCallsRequested.new_messages`` or ``TurnContinued``). ``RecordTurnFailure``
    and ``ApplyTurnControl`` call it; if it raises or returns anything but
    ``FrameworkMessage`` values, or a message with an invalid image, the session
    logs a warning and stores only its note.
    """

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's tool calls that the session has not stored yet."""
        ...


@runtime_checkable
class ImageUserMessageBuilder(Protocol):
    """Optional: user messages with images; without it ``send_user_message`` refuses images."""

    def build_user_message_with_images(
        self, text: str, images: Sequence[AgentImageReference]
    ) -> FrameworkMessage:
        """Like ``build_user_message``, for a message with images; keep references, not bytes."""
        ...


@runtime_checkable
class ImageStoreRunner(Protocol):
    """Optional, this build's addition: the media store an ``ImageUserMessageBuilder`` reads.

    The runner reads a message's images again from this store for every later
    model call, so an image of another store would fail every later turn of the
    session. With it, ``send_user_message``, ``steer_user_message`` and
    ``start_session`` refuse such an image before anything is stored.
    """

    @property
    def image_store_uri(self) -> str:
        """The ``store_uri`` of the store the runner reads images from."""
        ...


@runtime_checkable
class ToolCallStepOptionsProvider(Protocol):
    """Optional: a call's own tool Step timeout and, for ``CallTool``, retry policy."""

    def tool_call_step_options(self, call: AgentToolCall) -> ToolCallStepOptions | None:
        """The options of this call's tool Step, or ``None`` for the session's defaults.

        Synchronous and deterministic: ``RunModel`` asks when it moves to the Step,
        and a retry must choose the same options.
        """
        ...


@runtime_checkable
class ToolTaskPoller(Protocol):
    """Optional: polls the tool tasks that ``execute_deferred_tool_call`` started."""

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Read the task once and return its result, its next interval, or its question.

        ``ToolExecutionResult`` records ``succeeded`` and ``ToolExecutionError``
        ``failed``. ``ToolTaskPending`` stores the next interval and its
        ``continuation`` as ``input_continuation`` (``None`` clears it).
        ``ToolInputRequested`` asks the user; the answer, a decline or a passed
        deadline comes back as ``pending_answer``, since the started task decides.
        Keep the answered question's continuation only while the task may still
        show that question. Any other exception fails the poll attempt; after three,
        a ``read`` call records ``failed`` and any other ``outcome_unknown``, since
        the task may still run. A crash repeats only this poll, so only read the
        task, or deliver ``pending_answer`` idempotently, keyed by a question ID
        when the task has one. When a retry cannot tell whether an earlier attempt
        delivered it, return the question again instead.
        """
        ...


@runtime_checkable
class ToolTaskCanceller(Protocol):
    """Optional: stops the remote work of a task that ``cancel_turn`` abandoned."""

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel the task best-effort; idempotent by ``task_id``, as a retry calls it again.

        The call is recorded ``outcome_unknown`` whatever this does; when it keeps
        failing, the call is still recorded and the turn ends.
        """
        ...


@runtime_checkable
class ContextCompactionRunner(Protocol):
    """Optional: the runner side of compaction; a compaction policy requires it."""

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """The input tokens of this turn's next model call, without I/O; err high."""
        ...

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """The sequence of the last message to summarize, or ``None`` when no cut fits.

        Keep at most ``retained_token_budget`` tokens after the cut, and never
        separate a tool call from its result.
        """
        ...

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make the one model call that summarizes ``request.messages``."""
        ...


@runtime_checkable
class PlanModeRunner(Protocol):
    """Optional: a runner that offers only ``write_todos`` in a planning turn."""

    @property
    def supports_plan_mode(self) -> bool:
        """``True`` when the runner follows ``AgentTurnContext.interaction_mode``."""
        ...


def runner_supports_plan_mode(runner: object) -> bool:
    """Whether ``runner`` is a ``PlanModeRunner`` whose ``supports_plan_mode`` is ``True``."""
    return isinstance(runner, PlanModeRunner) and runner.supports_plan_mode is True
