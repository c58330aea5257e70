"""``CancelToolTask``: a started tool task that ``cancel_turn`` abandoned.

``FinishTurnCancellation`` hands each started task of the cancelled turn here.
The Step asks a ``ToolTaskCanceller`` runner to cancel the task, then records
the call ``outcome_unknown`` with ``cancellation_reason`` ``turn_cancelled``: the
task may have carried out its effect before the cancellation reached it.
"""

from __future__ import annotations

from datetime import timedelta

from dex_agents.app import tool_routing
from dex_agents.app.background_heartbeat import BackgroundHeartbeat
from dex_agents.app.session import SessionRuntime
from dex_agents.app.steps import tool_steps
from dex_agents.domain.tool_calls import CancellationReason
from dex_agents.domain.tool_outcomes import abandon_tool_task, cancel_unstarted_tool_call
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    RetryPolicy,
    Step,
    StepDecision,
    StepDurability,
    StepMovement,
    StepOptions,
    dead_end,
)
from dex_agents.ports.runner import ToolTaskCancellation, ToolTaskCanceller
from dex_agents.ports.session_schema import AGENT_TOOL_CALLS
from dex_agents.ports.step_contexts import StepContext

CANCEL_TOOL_TASK_TIMEOUT = timedelta(seconds=30)
"""``CancelToolTask``'s attempt timeout."""

CANCEL_TOOL_TASK_RETRY = RetryPolicy(maximum_attempts=3, total_duration=timedelta(minutes=2))
"""``CancelToolTask``'s retries: 3 attempts within 2 minutes."""


def _cancel_tool_task_options(loads: tuple[MapLoad, ...]) -> StepOptions:
    # Two cancellations of one turn can both hand a task over, and a poll that failed
    # before cancel_turn has its failure route record the call too: the lock makes the
    # second see the first's final record, so one result is published. The failure route
    # of this Step holds it too, as the poll's does (``tool_tasks.poll_movement``).
    locks = tuple(AttributeLock(AGENT_TOOL_CALLS, load.key) for load in loads if load.key)
    return StepOptions(
        execute_timeout=CANCEL_TOOL_TASK_TIMEOUT,
        retry=CANCEL_TOOL_TASK_RETRY,
        failure_step=tool_steps.RecordToolOutcomeUnknown,
        loads=loads,
        locks=locks,
        durability=StepDurability.SYNC,
        failure_locks=locks,
    )


def cancel_tool_task_movement(tool_call_id: str) -> StepMovement:
    """The movement to ``CancelToolTask`` for a call, loading and locking only its own record."""
    options = _cancel_tool_task_options((MapLoad(AGENT_TOOL_CALLS, tool_call_id),))
    return StepMovement(CancelToolTask, tool_call_id, options)


class CancelToolTask(Step[str]):
    """Asks a ``ToolTaskCanceller`` runner to cancel an abandoned task, then records
    ``outcome_unknown`` (``cancellation_reason`` ``turn_cancelled``) and publishes its result.
    3 attempts in 2 minutes, 30 second timeout, failure route ``RecordToolOutcomeUnknown``."""

    input_type = str

    def __init__(self, runtime: SessionRuntime) -> None:
        self.runtime = runtime

    def options(self) -> StepOptions:
        return _cancel_tool_task_options(())

    async def execute(self, context: StepContext, input: str) -> StepDecision:
        record = context.state.get_instance(AGENT_TOOL_CALLS, input)
        if record is None or record.is_final:
            return dead_end()
        runtime = self.runtime
        if record.task_id is None:  # nothing started: an ordinary cancelled call
            cancelled = cancel_unstarted_tool_call(record, CancellationReason.TURN_CANCELLED)
            tool_routing.finish_record(context, runtime, cancelled)
            return dead_end()
        runner = runtime.runner
        if isinstance(runner, ToolTaskCanceller):
            cancellation = ToolTaskCancellation(
                flow_id=context.flow_id, tool_call=record, attempt=context.attempt
            )
            async with BackgroundHeartbeat(context):
                await runner.cancel_tool_task(cancellation)
        tool_routing.finish_record(context, runtime, abandon_tool_task(record))
        return dead_end()
