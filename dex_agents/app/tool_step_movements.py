"""How a tool call moves to its Step: the tool Step's options, approval, and failure route.

A call runs in ``CallTool`` or ``CallSingleAttemptTool`` by its effect, with the
runner's ``tool_call_step_options`` over the defaults here; a call that needs
approval waits in ``AwaitToolApproval`` first. Every such Step loads only its
own ``AgentToolCalls`` record and, when it fails, records the call by its effect
(``failure_step_for``) rather than failing the session.
"""

from __future__ import annotations

from datetime import timedelta

from dex_agents.app.session import SessionRuntime
from dex_agents.app.steps import tool_steps
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_effects import (
    ToolFailureRoute,
    ToolStepType,
    max_tool_attempts,
    tool_effect_rules,
)
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    RetryPolicy,
    Step,
    StepMovement,
    StepOptions,
)
from dex_agents.ports.session_schema import AGENT_TOOL_CALLS, PENDING_INTERRUPTS

DEFAULT_TOOL_STEP_TIMEOUT = timedelta(hours=2)
"""A tool Step attempt's timeout unless the runner gives the call its own."""

TOOL_STEP_HEARTBEAT_TIMEOUT = timedelta(minutes=1)
"""A started tool Step attempt must heartbeat this often; the session does every 20 seconds."""


def own_record_load(tool_call_id: str) -> MapLoad:
    """The load of a Step that reads only its own tool call record."""
    return MapLoad(AGENT_TOOL_CALLS, tool_call_id)


def tool_step_movement(runtime: SessionRuntime, record: AgentToolCall) -> StepMovement:
    """The movement to a call's tool Step, with its own options and its record's load."""
    rules = tool_effect_rules(record.effect)
    provided = None
    options_provider = runtime.capabilities.tool_call_step_options
    if options_provider is not None:
        provided = options_provider.tool_call_step_options(record)
    timeout = (
        DEFAULT_TOOL_STEP_TIMEOUT
        if provided is None or provided.timeout is None
        else provided.timeout
    )
    retry = RetryPolicy(maximum_attempts=max_tool_attempts(record.effect))
    if rules.step is ToolStepType.CALL_TOOL and provided is not None and provided.retry_policy:
        policy = provided.retry_policy
        retry = RetryPolicy(
            maximum_attempts=policy.maximum_attempts or retry.maximum_attempts,
            initial_interval=policy.initial_interval or retry.initial_interval,
            backoff_coefficient=policy.backoff_coefficient or retry.backoff_coefficient,
            maximum_interval=policy.maximum_interval or retry.maximum_interval,
            total_duration=policy.total_duration,
        )
    step = (
        tool_steps.CallTool
        if rules.step is ToolStepType.CALL_TOOL
        else tool_steps.CallSingleAttemptTool
    )
    options = StepOptions(
        execute_timeout=timeout,
        heartbeat_timeout=TOOL_STEP_HEARTBEAT_TIMEOUT,
        retry=retry,
        failure_step=failure_step_for(record),
        loads=(own_record_load(record.tool_call_id),),
    )
    return StepMovement(step, record.tool_call_id, options)


def failure_step_for(record: AgentToolCall) -> type[Step[str]]:
    """The failure route of a Step that runs or waits for the call: by its effect."""
    if tool_effect_rules(record.effect).failure_route is ToolFailureRoute.RECORD_TOOL_FAILURE:
        return tool_steps.RecordToolFailure
    return tool_steps.RecordToolOutcomeUnknown


def approval_movement(record: AgentToolCall) -> StepMovement:
    """The movement to ``AwaitToolApproval`` for a call, loading only its own record.

    Its failure route records the call by its effect, so a Step that fails (such as
    on a runner whose ``tool_call_step_options`` raises once the call is approved)
    ends that call, not the whole session.
    """
    approval = tool_steps.AwaitToolApproval
    loads = (own_record_load(record.tool_call_id),)
    # The Step rewrites PendingInterrupts when a deadline passes; holding the lock
    # keeps resolve_interrupt from committing a change between its read and write.
    options = StepOptions(
        loads=loads,
        wait_loads=loads,
        locks=(AttributeLock(PENDING_INTERRUPTS),),
        failure_step=failure_step_for(record),
    )
    return StepMovement(approval, record.tool_call_id, options)
