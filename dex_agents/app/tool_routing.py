"""What ``RunModel`` does with a ``ToolCallsRequested``: a record, an event and a Step per call.

Each call gets an ``AgentToolCalls`` record with its effect and approval after
the policies. A call that needs approval raises an interrupt and waits in
``AwaitToolApproval``; any other goes straight to its tool Step. Calls that
settle in ``RunModel``'s own commit (``write_todos``, calls a planning turn
rejects, built-ins with invalid arguments) are final at once and publish their
result. Ordered writes run one at a time in the model's order: only the first
of a response starts, the others are recorded ``write_queued`` with no Step and
no interrupt, and ``RunModel`` starts each in turn (``start_queued_write``) or
records them skipped. ``ResumeTurn`` waits for one result per call that started
or settled in the commit; a queued write that never starts publishes none.
The Step a call moves to, with its options, is ``tool_step_movements.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import attrs

from dex_agents.app import tool_step_movements
from dex_agents.app.session import SessionRuntime, deadline_from
from dex_agents.app.session_events import commit_event
from dex_agents.app.steps import builtin_steps
from dex_agents.domain.builtin_tools import (
    BuiltInTool,
    enabled_built_in_tool,
    parse_ask_user_arguments,
    parse_durable_wait_arguments,
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
from dex_agents.domain.ordered_writes import queue_ordered_writes
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
from dex_agents.domain.tool_effects import ToolEffect, is_approval_required
from dex_agents.ports.engine import StepMovement
from dex_agents.ports.session_schema import (
    AGENT_PLAN,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    TOOL_CALL_RESULTS,
)
from dex_agents.ports.step_contexts import StepContext


def finish_record(context: StepContext, runtime: SessionRuntime, record: AgentToolCall) -> None:
    """Stage a final record, its one ``ToolCallResults`` message and ``tool_call_finished``."""
    _stage_final(context, runtime, record)
    context.state.publish(
        TOOL_CALL_RESULTS, ToolCallCompleted(tool_call_id=record.tool_call_id, status=record.status)
    )


def finish_queued_write(
    context: StepContext, runtime: SessionRuntime, record: AgentToolCall
) -> None:
    """Stage the final record of a queued write that never started, and ``tool_call_finished``.

    No ``ToolCallResults`` message: ``ResumeTurn`` counts only the calls that
    started or settled in ``RunModel``'s commit, so a message for a write that
    never started would be left over for a later wait.
    """
    _stage_final(context, runtime, record)


def _stage_final(context: StepContext, runtime: SessionRuntime, record: AgentToolCall) -> None:
    context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, record)
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
    """What ``RunModel`` commits for one response's tool calls.

    ``expected_results`` is ``ResumeTurn``'s count: every call but the queued writes.
    """

    movements: list[StepMovement] = field(default_factory=list)
    interrupts: list[AgentInterrupt] = field(default_factory=list)
    expected_results: int = 0


def route_tool_calls(
    context: StepContext,
    runtime: SessionRuntime,
    agent_state: AgentState,
    calls: Sequence[DeferredToolCall],
    first_order: int,
    trace_context: str | None,
) -> RoutedCalls:
    """Record each call, settle those that settle now, queue every ordered write but the
    first, and plan a Step for each of the others.

    ``trace_context`` is the activation's root span (``AgentTraceContext``) when its root
    stored one, whether or not this Worker traces: each record carries it from its first
    write, and its tool Step's ``execute_tool`` span is parented from it.
    """
    turn = agent_state.active_turn_id or ""
    options = runtime.options
    routed = RoutedCalls()
    twice = write_todos_called_more_than_once(
        [call.tool_name for call in calls], options.built_in_tools
    )
    built_ins = [enabled_built_in_tool(call.tool_name, options.built_in_tools) for call in calls]
    fresh: list[AgentToolCall] = []
    for order, (call, built_in) in enumerate(zip(calls, built_ins, strict=True), first_order):
        record = _new_record(call, turn, order, built_in is not None, trace_context)
        if is_rejected_in_planning_turn(call.tool_name, agent_state.interaction_mode):
            record = attrs.evolve(
                record, status=ToolCallStatus.REJECTED, rejection_message=PLANNING_TURN_REJECTION
            )
        fresh.append(record)
    # Calls a planning turn rejects are final in this commit, so the queue sees them final.
    records = queue_ordered_writes(fresh)
    for record, built_in in zip(records, built_ins, strict=True):
        commit_event(
            context,
            runtime.stream,
            turn,
            AgentEventType.TOOL_CALL_DEFERRED,
            ToolCallDeferredPayload(
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                effect=record.effect,
                requires_approval=record.requires_approval,
            ),
        )
        if record.is_final:
            # Rejected by the planning turn, or a write skipped after such a rejection.
            finish_record(context, runtime, record)
        elif built_in is BuiltInTool.WRITE_TODOS:
            _settle_write_todos(context, runtime, agent_state, record, twice)
        elif record.write_queued:
            context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, record)
            continue  # it starts later, from RunModel, and only then publishes a result
        elif built_in is not None and (
            invalid := _invalid_built_in_arguments(runtime, record, built_in)
        ):
            # A built-in call with invalid arguments fails at once, in this commit.
            finish_record(
                context, runtime, attrs.evolve(record, status=ToolCallStatus.FAILED, error=invalid)
            )
        elif built_in is not None:
            context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, record)
            routed.movements.append(builtin_steps.movement_for(runtime, record, built_in))
        else:
            movement, interrupt = _start_call(context, runtime, record)
            routed.movements.append(movement)
            if interrupt is not None:
                routed.interrupts.append(interrupt)
        routed.expected_results += 1
    if routed.interrupts:
        pending = context.state.get(PENDING_INTERRUPTS) or ()
        context.state.set(PENDING_INTERRUPTS, (*pending, *routed.interrupts))
    return routed


def start_queued_write(
    context: StepContext, runtime: SessionRuntime, record: AgentToolCall
) -> StepMovement:
    """Start a queued write whose turn came (``write_queued`` already cleared).

    Stages its record, and raises its approval now when it needs one (interrupt,
    ``interrupt_raised``, ``AwaitToolApproval``); else returns its tool Step.
    """
    movement, interrupt = _start_call(context, runtime, record)
    if interrupt is not None:
        pending = context.state.get(PENDING_INTERRUPTS) or ()
        context.state.set(PENDING_INTERRUPTS, (*pending, interrupt))
    return movement


def _new_record(
    call: DeferredToolCall, turn: str, order: int, built_in: bool, trace_context: str | None
) -> AgentToolCall:
    policy = call.policy
    if built_in:
        # Built-ins are session features: no approval, the read effect.
        policy = attrs.evolve(policy, effect=ToolEffect.READ, requires_approval=False)
    approval = is_approval_required(policy)
    return AgentToolCall(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        turn_id=turn,
        effect=policy.effect,
        requires_approval=approval,
        status=ToolCallStatus.AWAITING_APPROVAL if approval else ToolCallStatus.APPROVED,
        deferral_order=order,
        ordered=call.ordered,
        built_in=built_in,
        tool_source_reference=call.tool_source_reference,
        runner_tool_state=call.runner_tool_state,
        trace_context=trace_context,
    )


def _start_call(
    context: StepContext, runtime: SessionRuntime, record: AgentToolCall
) -> tuple[StepMovement, AgentInterrupt | None]:
    # The caller adds the interrupt to PendingInterrupts, once for the whole commit.
    context.state.set_instance(AGENT_TOOL_CALLS, record.tool_call_id, record)
    if record.status is not ToolCallStatus.AWAITING_APPROVAL:
        return tool_step_movements.tool_step_movement(runtime, record), None
    interrupt = AgentInterrupt(
        interrupt_id=record.tool_call_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        kind=InterruptKind.APPROVAL,
        turn_id=record.turn_id,
        arguments=record.arguments,
        deadline=deadline_from(context.now, runtime.options),
    )
    commit_event(
        context,
        runtime.stream,
        record.turn_id,
        AgentEventType.INTERRUPT_RAISED,
        InterruptRaisedPayload(
            interrupt_id=interrupt.interrupt_id,
            tool_call_id=interrupt.tool_call_id,
            tool_name=interrupt.tool_name,
            deadline=interrupt.deadline,
            kind=InterruptKind.APPROVAL,
        ),
    )
    return tool_step_movements.approval_movement(record), interrupt


def _invalid_built_in_arguments(
    runtime: SessionRuntime, record: AgentToolCall, built_in: BuiltInTool
) -> str | None:
    """The ``invalid <tool> arguments: <reason>`` text of a built-in call, or ``None``."""
    try:
        if built_in is BuiltInTool.ASK_USER:
            parse_ask_user_arguments(record.arguments)
        elif built_in is BuiltInTool.DURABLE_WAIT:
            parse_durable_wait_arguments(
                record.arguments, max_durable_wait=runtime.options.max_durable_wait
            )
    except ToolExecutionError as error:
        return str(error)
    return None


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
