"""What ``RunModel`` does with a ``ToolCallsRequested``: a record, an event and a Step per call.

Each call gets an ``AgentToolCalls`` record with its effect and approval after
the policies. A call that needs approval raises an interrupt and waits in
``AwaitToolApproval``; any other goes straight to its tool Step. Calls that
settle in ``RunModel``'s own commit (``write_todos``, calls a planning turn
rejects, built-ins with invalid arguments) are final at once and publish their
result, so ``ResumeTurn`` always waits for one result per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import attrs

from dex_agents.app.session import SessionRuntime, deadline_from
from dex_agents.app.session_events import commit_event
from dex_agents.app.steps import builtin_steps, tool_steps
from dex_agents.domain.builtin_tools import (
    BuiltInTool,
    enabled_built_in_tool,
    parse_write_todos_arguments,
)
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import (
    AgentEventType,
    InterruptRaisedPayload,
    PlanUpdatedPayload,
    ToolCallDeferredPayload,
    ToolCallFinishedPayload,
)
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.plans import (
    PLANNING_TURN_REJECTION,
    WRITE_TODOS_CALLED_TWICE_ERROR,
    apply_write_todos,
    is_rejected_in_planning_turn,
    write_todos_called_more_than_once,
    write_todos_output,
)
from dex_agents.domain.runner_outcomes import DeferredToolCall
from dex_agents.domain.state import AgentState
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallCompleted, ToolCallStatus
from dex_agents.domain.tool_effects import (
    ToolEffect,
    ToolFailureRoute,
    ToolStepType,
    is_approval_required,
    max_tool_attempts,
    tool_effect_rules,
)
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    RetryPolicy,
    StepContext,
    StepMovement,
    StepOptions,
)
from dex_agents.ports.runner import ToolCallStepOptionsProvider
from dex_agents.ports.session_schema import (
    AGENT_PLAN,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    TOOL_CALL_RESULTS,
)

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
    if isinstance(runtime.runner, ToolCallStepOptionsProvider):
        provided = runtime.runner.tool_call_step_options(record)
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
    failure = (
        tool_steps.RecordToolFailure
        if rules.failure_route is ToolFailureRoute.RECORD_TOOL_FAILURE
        else tool_steps.RecordToolOutcomeUnknown
    )
    options = StepOptions(
        execute_timeout=timeout,
        heartbeat_timeout=TOOL_STEP_HEARTBEAT_TIMEOUT,
        retry=retry,
        failure_step=failure,
        loads=(own_record_load(record.tool_call_id),),
    )
    return StepMovement(step, record.tool_call_id, options)


def approval_movement(record: AgentToolCall) -> StepMovement:
    """The movement to ``AwaitToolApproval`` for a call, loading only its own record."""
    approval = tool_steps.AwaitToolApproval
    loads = (own_record_load(record.tool_call_id),)
    # The Step rewrites PendingInterrupts when a deadline passes; holding the lock
    # keeps resolve_interrupt from committing a change between its read and write.
    options = StepOptions(loads=loads, wait_loads=loads, locks=(AttributeLock(PENDING_INTERRUPTS),))
    return StepMovement(approval, record.tool_call_id, options)


def finish_record(context: StepContext, runtime: SessionRuntime, record: AgentToolCall) -> None:
    """Stage a final record, its one ``ToolCallResults`` message and ``tool_call_finished``."""
    context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, record)
    context.state.publish(
        TOOL_CALL_RESULTS, ToolCallCompleted(tool_call_id=record.tool_call_id, status=record.status)
    )
    commit_event(
        context,
        runtime.stream,
        record.turn_id,
        AgentEventType.TOOL_CALL_FINISHED,
        ToolCallFinishedPayload(
            tool_call_id=record.tool_call_id, tool_name=record.tool_name, status=record.status
        ),
    )


@dataclass
class RoutedCalls:
    """What ``RunModel`` commits for one response's tool calls."""

    movements: list[StepMovement] = field(default_factory=list)
    interrupts: list[AgentInterrupt] = field(default_factory=list)


def route_tool_calls(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    calls: Sequence[DeferredToolCall],
    first_order: int,
) -> RoutedCalls:
    """Record each call, settle those that settle now, and plan a Step for each of the others."""
    turn = agent_state.active_turn_id or ""
    options = runtime.options
    routed = RoutedCalls()
    twice = write_todos_called_more_than_once(
        [call.tool_name for call in calls], options.built_in_tools
    )
    for order, call in enumerate(calls, start=first_order):
        built_in = enabled_built_in_tool(call.tool_name, options.built_in_tools)
        policy = call.policy
        if built_in is not None:
            # Built-ins are session features: no approval, the read effect.
            policy = attrs.evolve(policy, effect=ToolEffect.READ, requires_approval=False)
        approval = is_approval_required(policy)
        record = AgentToolCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            turn_id=turn,
            effect=policy.effect,
            requires_approval=approval,
            status=ToolCallStatus.AWAITING_APPROVAL if approval else ToolCallStatus.APPROVED,
            deferral_order=order,
            ordered=call.ordered,
            built_in=built_in is not None,
            tool_source_reference=call.tool_source_reference,
            runner_tool_state=call.runner_tool_state,
        )
        commit_event(
            context,
            runtime.stream,
            turn,
            AgentEventType.TOOL_CALL_DEFERRED,
            ToolCallDeferredPayload(
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                effect=record.effect,
                requires_approval=approval,
            ),
        )
        if is_rejected_in_planning_turn(call.tool_name, agent_state.interaction_mode):
            rejected = attrs.evolve(
                record, status=ToolCallStatus.REJECTED, rejection_message=PLANNING_TURN_REJECTION
            )
            finish_record(context, runtime, rejected)
            continue
        if built_in is BuiltInTool.WRITE_TODOS:
            _settle_write_todos(context, runtime, agent_state, record, twice)
            continue
        context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, record)
        if built_in is not None:
            routed.movements.append(builtin_steps.movement_for(runtime, record, built_in))
        elif approval:
            interrupt = AgentInterrupt(
                interrupt_id=record.tool_call_id,
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                kind=InterruptKind.APPROVAL,
                turn_id=turn,
                arguments=record.arguments,
                deadline=deadline_from(context.now, options),
            )
            routed.interrupts.append(interrupt)
            commit_event(
                context,
                runtime.stream,
                turn,
                AgentEventType.INTERRUPT_RAISED,
                InterruptRaisedPayload(
                    interrupt_id=interrupt.interrupt_id,
                    tool_call_id=interrupt.tool_call_id,
                    tool_name=interrupt.tool_name,
                    deadline=interrupt.deadline,
                    kind=InterruptKind.APPROVAL,
                ),
            )
            routed.movements.append(approval_movement(record))
        else:
            routed.movements.append(tool_step_movement(runtime, record))
    if routed.interrupts:
        pending = context.state.get(PENDING_INTERRUPTS) or ()
        context.state.set(PENDING_INTERRUPTS, (*pending, *routed.interrupts))
    return routed


def _settle_write_todos(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    record: AgentToolCall,
    called_twice: bool,
) -> None:
    # write_todos settles in RunModel's own commit, so a call the model made while
    # the user steered still replaces the plan.
    if called_twice:
        finish_record(
            context,
            runtime,
            attrs.evolve(
                record, status=ToolCallStatus.FAILED, error=WRITE_TODOS_CALLED_TWICE_ERROR
            ),
        )
        return
    try:
        todos = parse_write_todos_arguments(record.arguments)
    except ToolExecutionError as error:
        finish_record(
            context, runtime, attrs.evolve(record, status=ToolCallStatus.FAILED, error=str(error))
        )
        return
    plan = apply_write_todos(
        context.state.get(AGENT_PLAN), todos, agent_state.interaction_mode, record.turn_id
    )
    context.state.set(AGENT_PLAN, plan)
    commit_event(
        context,
        runtime.stream,
        record.turn_id,
        AgentEventType.PLAN_UPDATED,
        PlanUpdatedPayload(revision=plan.revision, status=plan.status, task_count=len(plan.todos)),
    )
    finish_record(
        context,
        runtime,
        attrs.evolve(record, status=ToolCallStatus.SUCCEEDED, output=write_todos_output(plan)),
    )
