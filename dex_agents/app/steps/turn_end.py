"""``ResumeTurn`` and ``RecordTurnFailure``: where a turn goes after its tool calls, or after it failed."""

from __future__ import annotations

import logging
from typing import Any

import attrs

from dex_agents.app.message_store import CHUNKS_LOAD, WINDOW_LOAD, store_messages
from dex_agents.app.session import (
    SessionRuntime,
    build_user_message,
    end_turn,
    require_state,
    turn_records,
)
from dex_agents.app.session_events import SessionEventWriter
from dex_agents.app.steps import run_model, start
from dex_agents.domain.images import validate_image_references
from dex_agents.domain.messages import FrameworkMessage
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.domain.tool_outcomes import build_turn_failure_note
from dex_agents.ports.engine import (
    ChannelCondition,
    MapLoad,
    Step,
    StepContext,
    StepDecision,
    StepOptions,
    Wait,
    WaitContext,
    go_to,
)
from dex_agents.ports.runner import UnfinishedTurnMessageBuilder
from dex_agents.ports.session_schema import AGENT_STATE, AGENT_TOOL_CALLS, TOOL_CALL_RESULTS

logger = logging.getLogger("dex_agents.session")


class ResumeTurn(Step[int]):
    """Waits for one ``ToolCallResults`` message per tool call, then calls the model again."""

    input_type = int

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(loads=(MapLoad(AGENT_TOOL_CALLS),))

    async def wait_for(self, context: WaitContext, input: int) -> Wait:
        return Wait.any_of(ChannelCondition(TOOL_CALL_RESULTS, max(input, 1)))

    async def execute(self, context: StepContext, input: int) -> StepDecision:
        state = context.state
        agent_state = require_state(state)
        unfinished = [record for record in turn_records(state).values() if not record.is_final]
        if unfinished:
            # A consumed result left a record of the turn unfinished: wait for the rest.
            return go_to(ResumeTurn, len(unfinished))
        state.set(AGENT_STATE, attrs.evolve(agent_state, status=AgentStatus.RUNNING_MODEL))
        return go_to(run_model.RunModel)


class RecordTurnFailure(Step[Any]):
    """The failure route of ``RunModel`` and ``CompactContext``: the turn ends as failed.

    Stores the runner's unfinished-turn messages when it can build them, then one
    turn-failure note when the turn has final tool call records, so the next turn's
    model does not repeat a write.
    """

    input_type = Any

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return StepOptions(loads=(WINDOW_LOAD, CHUNKS_LOAD, MapLoad(AGENT_TOOL_CALLS)))

    async def execute(self, context: StepContext, input: Any) -> StepDecision:
        runtime = self.runtime
        state = context.state
        agent_state = require_state(state)
        if agent_state.active_turn_id is None:
            return go_to(start.AwaitUserMessage)
        error = context.recovery_error
        text = "the model call failed" if error is None else (error.detail or error.error_type)
        messages = await self._unfinished_turn_messages(context, agent_state)
        note = build_turn_failure_note(turn_records(state).values())
        if note is not None:
            messages.append(build_user_message(runtime, note, ()))
        agent_state, _ = store_messages(
            state,
            agent_state,
            messages,
            turn_id=agent_state.active_turn_id,
            options=runtime.options.message_storage(),
            now=context.now,
        )
        end_turn(context, runtime, agent_state, error=text)
        return go_to(start.AwaitUserMessage)

    async def _unfinished_turn_messages(
        self, context: StepContext, agent_state: AgentState
    ) -> list[FrameworkMessage]:
        runner = self.runtime.runner
        if not isinstance(runner, UnfinishedTurnMessageBuilder):
            return []
        writer = SessionEventWriter(context, self.runtime.stream, agent_state.active_turn_id)
        try:
            turn = run_model.build_turn_context(context, self.runtime, agent_state, writer)
            built = list(runner.build_unfinished_turn_messages(turn))
            if not all(isinstance(message, FrameworkMessage) for message in built):
                raise TypeError(
                    "build_unfinished_turn_messages must return FrameworkMessage values"
                )
            for message in built:
                validate_image_references(message.images)
            return built
        except Exception:
            logger.warning(
                "build_unfinished_turn_messages failed; only the turn-failure note is stored",
                exc_info=True,
            )
            return []
        finally:
            writer.close()
