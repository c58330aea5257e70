"""``RunModel``: one model call per Step, from committed state only.

Before a model call it settles the turn's queued writes: it starts the next one
(without a model call) once the write before it succeeded, or records them all
skipped once a write of their response did not, and then calls the model.
"""

from __future__ import annotations

import dataclasses

import attrs

from dex_agents.app import spend, tracing
from dex_agents.app.background_heartbeat import BackgroundHeartbeat
from dex_agents.app.message_store import (
    CHUNKS_LOAD,
    WINDOW_LOAD,
    all_messages,
    model_input_chunk_loads,
    model_input_loaded,
)
from dex_agents.app.session import (
    SessionRuntime,
    end_turn,
    record_usage,
    require_state,
    store_turn_messages,
    turn_records,
)
from dex_agents.app.session_events import SessionEventWriter
from dex_agents.app.steps import compaction_steps, start, turn_control, turn_end
from dex_agents.app.tool_routing import (
    finish_queued_write,
    route_tool_calls,
    start_queued_write,
)
from dex_agents.domain.images import validate_image_references
from dex_agents.domain.ordered_writes import OrderedWriteAction, decide_next_ordered_write
from dex_agents.domain.runner_outcome_checks import (
    check_agent_turn_outcome,
)
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    ToolCallsRequested,
    TurnCompleted,
    TurnContinued,
)
from dex_agents.domain.session_settings import read_turn_settings
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.ports.engine import (
    MapLoad,
    RetryPolicy,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    go_to,
    go_to_many,
)
from dex_agents.ports.errors import ModelCallError
from dex_agents.ports.persistence import StateReader
from dex_agents.ports.runner import AgentTurnContext
from dex_agents.ports.session_schema import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    CONTEXT_SUMMARY,
    FRAMEWORK_RUN_STATE,
    TURN_SESSION_SETTINGS,
)
from dex_agents.ports.step_contexts import StepContext

NEW_MESSAGES_WITHOUT_BUILDER_ERROR = (
    "the runner stored messages with ToolCallsRequested.new_messages but does not implement "
    "build_unfinished_turn_messages, so the turn ended after one model call"
)
"""``last_turn_error`` of a turn whose runner broke the incremental-storage rule."""


def model_step_options(runtime: SessionRuntime) -> StepOptions:
    """``RunModel``'s (and ``CompactContext``'s) timeouts, retries and failure route."""
    limit = runtime.options.run_model_limit
    return StepOptions(
        execute_timeout=limit.timeout,
        heartbeat_timeout=limit.heartbeat_timeout,
        retry=RetryPolicy(
            maximum_attempts=limit.maximum_attempts, total_duration=limit.total_duration
        ),
        failure_step=turn_end.RecordTurnFailure,
        loads=(WINDOW_LOAD, CHUNKS_LOAD, MapLoad(AGENT_TOOL_CALLS)),
    )


def go_to_run_model(state: StateReader, runtime: SessionRuntime) -> StepDecision:
    """Move to ``RunModel`` with the loads of its model input as the moving commit leaves it.

    With compaction and a summary, the movement's options load only the chunks
    after the summary. Only Steps that store messages change the chunks, and none
    runs between this commit and the model call, so what is loaded is what it reads.
    """
    chunks = model_input_chunk_loads(
        state, compaction_enabled=runtime.options.compaction is not None
    )
    if chunks is None:
        return go_to(RunModel)  # every chunk, as the Step's own options say
    loads = (WINDOW_LOAD, *chunks, MapLoad(AGENT_TOOL_CALLS))
    options = dataclasses.replace(model_step_options(runtime), loads=loads)
    return go_to_many(StepMovement(RunModel, None, options))


def build_turn_context(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    events: SessionEventWriter,
) -> AgentTurnContext:
    """The committed state ``run_model_step`` (and friends) work from."""
    state = context.state
    turn = agent_state.active_turn_id or ""
    # Without compaction the model input is every stored message, and no summary: a session
    # compacted before, now served without it, keeps its summarized messages until retention
    # (which only compaction runs) deletes them.
    summary = state.get(CONTEXT_SUMMARY) if runtime.options.compaction is not None else None
    return AgentTurnContext(
        flow_id=context.flow_id,
        turn_id=turn,
        attempt=context.attempt,
        messages=all_messages(
            state, after_sequence=None if summary is None else summary.last_sequence
        ),
        events=events,
        heartbeat=context.heartbeat,
        framework_run_state=state.get(FRAMEWORK_RUN_STATE),
        tool_calls=turn_records(state),
        tool_policies=runtime.options.tool_policies,
        default_tool_effect=runtime.options.default_tool_effect,
        enabled_built_in_tools=runtime.options.built_in_tools,
        interaction_mode=agent_state.interaction_mode,
        session_settings=read_turn_settings(state.get(TURN_SESSION_SETTINGS), turn),
        context_summary=summary,
        plan=state.get(AGENT_PLAN),
    )


class RunModel(Step[None]):
    """Calls ``run_model_step`` once and commits what it returns."""

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return model_step_options(self.runtime)

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        with tracing.model_attempt(
            context, self.runtime, require_state(context.state).active_turn_id
        ) as chat:
            return await self._execute(context, chat)

    async def _execute(self, context: StepContext, chat: tracing.ModelAttempt) -> StepDecision:
        runtime = self.runtime
        agent_state = require_state(context.state)
        if agent_state.active_turn_id is None:
            return go_to(start.AwaitUserMessage)
        decision = turn_control.steered_or_cancelled(context, self.runtime, agent_state)
        if decision is None:
            decision = self._settle_queued_writes(context, agent_state)
        if decision is not None:
            return decision
        if not model_input_loaded(
            context.state, compaction_enabled=runtime.options.compaction is not None
        ):
            # Moved to under another configuration: move again, loading what this one reads.
            return go_to_run_model(context.state, runtime)
        writer = SessionEventWriter(context, runtime.stream, agent_state.active_turn_id)
        turn = build_turn_context(context, runtime, agent_state, writer)
        # Compaction replaces this model call; the spend limit is asked only before a real one.
        decision = compaction_steps.maybe_compact(context, runtime, agent_state, turn)
        if decision is None:
            decision = await spend.check_model_call(
                context, runtime, turn.turn_id, turn.session_settings
            )
        if decision is not None:
            writer.close()
            return decision
        chat.started(turn.messages, turn.tool_calls)
        try:
            async with BackgroundHeartbeat(context):
                raw = await runtime.runner.run_model_step(turn)
        except ModelCallError as error:
            return turn_end.model_call_failed(error, chat)
        finally:
            writer.close()
        outcome = check_agent_turn_outcome(raw, recorded_tool_call_ids=turn.tool_calls.keys())
        chat.produced(outcome, agent_state.last_sequence + 1)
        for message in outcome.new_messages:
            validate_image_references(message.images)  # invalid ones fail the model call
        record_usage(context, runtime, agent_state.active_turn_id, outcome.usage)
        await spend.record_model_usage(
            context, runtime, turn.turn_id, turn.session_settings, outcome.usage
        )
        return self._commit(context, agent_state, outcome, len(turn.tool_calls), chat.parent)

    def _settle_queued_writes(
        self, context: StepContext, agent_state: AgentState
    ) -> StepDecision | None:
        # Ordered writes of the last response: the next one starts instead of a
        # model call; skipped ones are staged and the model call goes ahead.
        decision = decide_next_ordered_write(turn_records(context.state).values())
        if decision.action is OrderedWriteAction.NO_QUEUED_WRITE:
            return None
        if decision.action is OrderedWriteAction.SKIP_WRITES:
            for skipped in decision.skipped:
                finish_queued_write(context, self.runtime, skipped)
            return None
        running = attrs.evolve(agent_state, status=AgentStatus.RUNNING_TOOLS)
        context.state.set(AGENT_STATE, running)
        if decision.action is OrderedWriteAction.WAIT_FOR_WRITE:
            # Not reached while ResumeTurn waits for every started call; the write
            # that still runs publishes one result.
            return go_to(turn_end.ResumeTurn, 1)
        assert decision.started is not None
        movement = start_queued_write(context, self.runtime, decision.started)
        return go_to_many(movement, StepMovement(turn_end.ResumeTurn, 1))

    def _commit(
        self,
        context: StepContext,
        agent_state: AgentState,
        outcome: AgentTurnOutcome,
        recorded: int,
        trace_context: str | None,
    ) -> StepDecision:
        runtime = self.runtime
        state = context.state
        turn = agent_state.active_turn_id or ""
        last_sequence, _ = store_turn_messages(
            context, runtime, agent_state, outcome.new_messages, turn
        )
        if isinstance(outcome, TurnCompleted):
            end_turn(
                context, runtime, agent_state, error=outcome.turn_error, last_sequence=last_sequence
            )
            return go_to(start.AwaitUserMessage)
        if isinstance(outcome, TurnContinued):
            state.set(FRAMEWORK_RUN_STATE, outcome.framework_run_state)
            state.set(AGENT_STATE, attrs.evolve(agent_state, last_sequence=last_sequence))
            return go_to_run_model(state, runtime)
        assert isinstance(outcome, ToolCallsRequested)
        if outcome.new_messages and runtime.capabilities.unfinished_turn_messages is None:
            end_turn(
                context,
                runtime,
                agent_state,
                error=NEW_MESSAGES_WITHOUT_BUILDER_ERROR,
                last_sequence=last_sequence,
            )
            return go_to(start.AwaitUserMessage)
        state.set(FRAMEWORK_RUN_STATE, outcome.framework_run_state)
        agent_state = attrs.evolve(
            agent_state, status=AgentStatus.RUNNING_TOOLS, last_sequence=last_sequence
        )
        state.set(AGENT_STATE, agent_state)
        routed = route_tool_calls(
            context, runtime, agent_state, outcome.tool_calls, recorded, trace_context
        )
        resume = StepMovement(turn_end.ResumeTurn, routed.expected_results)
        return go_to_many(*routed.movements, resume)
