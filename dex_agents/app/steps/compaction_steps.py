"""Compaction in the session Flow: ``RunModel``'s threshold check and the ``CompactContext`` Step.

Before each model call ``RunModel`` asks ``maybe_compact``: at the policy's
trigger, with a cutoff past the current summary, it moves to ``CompactContext``
instead of calling the model. ``CompactContext`` makes the one summary call,
stores the next ``ContextSummary`` and goes back to ``RunModel``, whose next
estimate finds no new cutoff, so the pair cannot loop.
"""

from __future__ import annotations

import logging

import attrs

from dex_agents.app import spend, tracing
from dex_agents.app.background_heartbeat import BackgroundHeartbeat
from dex_agents.app.message_store import all_messages
from dex_agents.app.session import (
    SessionRuntime,
    SessionStateError,
    record_usage,
    require_state,
)
from dex_agents.app.session_events import build_event, commit_event
from dex_agents.app.steps import run_model, start, turn_end
from dex_agents.domain.compaction import is_new_compaction_cutoff, next_context_summary
from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.events import (
    AgentEventType,
    CompactionFinishedPayload,
    CompactionStartedPayload,
)
from dex_agents.domain.paging import deleted_before_sequence
from dex_agents.domain.runner_outcomes import ContextSummaryResult
from dex_agents.domain.session_settings import read_turn_settings
from dex_agents.domain.state import AgentState, AgentStatus, CompactContextInput
from dex_agents.domain.usage import check_model_call_usage
from dex_agents.ports.engine import Step, StepDecision, StepOptions, go_to
from dex_agents.ports.errors import ModelCallError
from dex_agents.ports.runner import AgentTurnContext, ContextCompactionRunner
from dex_agents.ports.session_schema import (
    AGENT_MESSAGE_INDEX,
    AGENT_STATE,
    CONTEXT_SUMMARY,
    TURN_SESSION_SETTINGS,
)
from dex_agents.ports.step_contexts import StepContext

logger = logging.getLogger("dex_agents.session")


def _compaction_runner(runtime: SessionRuntime) -> ContextCompactionRunner:
    runner = runtime.capabilities.context_compaction
    if runner is None:
        # AgentSessionFlow refuses this combination; only a changed runtime gets here.
        raise SessionStateError(
            "a compaction policy needs a runner that implements ContextCompactionRunner"
        )
    return runner


def _require_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must return an int, not {type(value).__name__}")
    return value


def _check_cutoff(cutoff: object, agent_state: AgentState) -> int | None:
    """The runner's cutoff, or an error naming what is wrong with it (which fails the attempt)."""
    if cutoff is None:
        return None
    value = _require_count("select_compaction_cutoff", cutoff)
    if not 1 <= value <= agent_state.last_sequence:
        raise ValueError(
            f"select_compaction_cutoff returned {value}, which is not the sequence of a stored"
            f" message (1 to {agent_state.last_sequence})"
        )
    return value


def _warn_deleted_messages_without_summary(context: StepContext, runtime: SessionRuntime) -> None:
    if runtime.capabilities.context_compaction is not None:
        return
    deleted_before = deleted_before_sequence(context.state.get(AGENT_MESSAGE_INDEX))
    if deleted_before is not None:
        logger.warning(
            "session %s: messages before sequence %d were deleted, and the runner does not"
            " implement ContextCompactionRunner, so its model input starts after them with"
            " no summary",
            context.flow_id,
            deleted_before,
        )


def maybe_compact(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    turn: AgentTurnContext,
) -> StepDecision | None:
    """``RunModel``'s compaction check before its model call; ``None`` means call the model.

    At ``CompactionPolicy.is_triggered`` of ``estimate_input_tokens(turn)`` it asks
    ``select_compaction_cutoff(turn, retained_token_budget)``; a cutoff past the
    current summary sets status ``compacting_context`` and returns the move to
    ``CompactContext(through_sequence)``. A cutoff that is not a stored message's
    sequence fails the attempt like a runner error.
    """
    policy = runtime.options.compaction
    if policy is None:
        _warn_deleted_messages_without_summary(context, runtime)
        return None
    runner = _compaction_runner(runtime)
    estimate = _require_count("estimate_input_tokens", runner.estimate_input_tokens(turn))
    if not policy.is_triggered(estimate):
        return None
    cutoff = _check_cutoff(
        runner.select_compaction_cutoff(turn, policy.retained_token_budget), agent_state
    )
    if cutoff is None or not is_new_compaction_cutoff(cutoff, turn.context_summary):
        return None
    compacting = attrs.evolve(agent_state, status=AgentStatus.COMPACTING_CONTEXT)
    context.state.set(AGENT_STATE, compacting)
    return go_to(CompactContext, CompactContextInput(through_sequence=cutoff))


class CompactContext(Step[CompactContextInput]):
    """Calls ``summarize_context`` once and stores ``ContextSummary``; then ``RunModel``.

    ``RunModel``'s timeouts, attempts and failure route (``RecordTurnFailure``).
    Asks the spend limit first, writes ``compaction_started`` live when the call
    starts, and commits the summary, the call's ``usage_recorded`` and
    ``compaction_finished`` together, so a crash reruns only the summary call.
    """

    input_type = CompactContextInput

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return run_model.model_step_options(self.runtime)

    async def execute(self, context: StepContext, input: CompactContextInput) -> StepDecision:
        with tracing.model_attempt(
            context, self.runtime, require_state(context.state).active_turn_id
        ) as chat:
            return await self._execute(context, input, chat)

    async def _execute(
        self, context: StepContext, input: CompactContextInput, chat: tracing.ModelAttempt
    ) -> StepDecision:
        runtime = self.runtime
        state = context.state
        agent_state = require_state(state)
        turn = agent_state.active_turn_id
        if turn is None:
            return go_to(start.AwaitUserMessage)
        summary = state.get(CONTEXT_SUMMARY)
        through = input.through_sequence
        if runtime.options.compaction is None or not is_new_compaction_cutoff(through, summary):
            # Already summarized (or compaction was turned off): nothing to do.
            return self._back_to_model(context, runtime, agent_state)
        _check_cutoff(through, agent_state)
        runner = _compaction_runner(runtime)
        settings = read_turn_settings(state.get(TURN_SESSION_SETTINGS), turn)
        refused = await spend.check_model_call(context, runtime, turn, settings)
        if refused is not None:
            return refused
        after = None if summary is None else summary.last_sequence
        request = ContextSummaryRequest(
            flow_id=context.flow_id,
            turn_id=turn,
            messages=tuple(
                message
                for message in all_messages(state, after_sequence=after)
                if message.sequence <= through
            ),
            through_sequence=through,
            input_token_budget=runtime.options.compaction.context_window_tokens,
            previous_summary=summary,
            session_settings=dict(settings),
        )
        context.write_event(
            runtime.stream,
            build_event(
                context,
                turn,
                AgentEventType.COMPACTION_STARTED,
                CompactionStartedPayload(through_sequence=through),
            ),
        )
        # The heartbeat writes compaction_started now, even if the summary call then fails.
        await context.heartbeat()
        chat.started(request.messages)
        try:
            async with BackgroundHeartbeat(context):
                result = await runner.summarize_context(request)
        except ModelCallError as error:
            return turn_end.model_call_failed(error, chat)
        if not isinstance(result, ContextSummaryResult):
            raise TypeError(
                f"summarize_context must return ContextSummaryResult, not {type(result).__name__}"
            )
        if not isinstance(result.text, str):
            raise TypeError(
                f"ContextSummaryResult.text must be a str, not {type(result.text).__name__}"
            )
        check_model_call_usage(result.usage, "ContextSummaryResult.usage")
        stored = next_context_summary(
            summary, last_sequence=through, text=result.text, now=context.now
        )
        state.set(CONTEXT_SUMMARY, stored)
        chat.summarized(result.text, result.usage, result.model_call_metadata)
        record_usage(context, runtime, turn, result.usage)
        await spend.record_model_usage(context, runtime, turn, settings, result.usage)
        commit_event(
            context,
            runtime.stream,
            turn,
            AgentEventType.COMPACTION_FINISHED,
            CompactionFinishedPayload(generation=stored.generation, through_sequence=through),
        )
        return self._back_to_model(context, runtime, agent_state)

    @staticmethod
    def _back_to_model(
        context: StepContext, runtime: SessionRuntime, agent_state: AgentState
    ) -> StepDecision:
        context.state.set(AGENT_STATE, attrs.evolve(agent_state, status=AgentStatus.RUNNING_MODEL))
        return run_model.go_to_run_model(context.state, runtime)
