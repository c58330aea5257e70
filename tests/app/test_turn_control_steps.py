"""The turn control Steps over a fake transaction: the tool Step check, ``FinishTurnCancellation``,
``CancelToolTask``, and what ``ApplyTurnControl`` and ``AwaitUserMessage`` wait for and do."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from dex_agents.app.steps.cancel_tool_task import CancelToolTask
from dex_agents.app.steps.start import AwaitUserMessage
from dex_agents.app.steps.tool_steps import CallSingleAttemptTool, CallTool
from dex_agents.app.steps.turn_control import (
    ApplyTurnControl,
    FinishTurnCancellation,
    cancel_before_start,
)
from dex_agents.domain.builtin_tools import durable_wait_output
from dex_agents.domain.events import AgentEvent, InterruptResolvedPayload
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.plans import AgentPlan, PlanExecutionRequest, PlanStatus
from dex_agents.domain.state import (
    AgentState,
    AgentStatus,
)
from dex_agents.domain.tool_calls import CancellationReason, ToolCallStatus
from dex_agents.domain.wire import from_json
from dex_agents.ports.engine import DecisionKind
from dex_agents.ports.persistence import AttributeDef, ChannelDef
from dex_agents.ports.runner import ToolTaskCancellation
from dex_agents.ports.session_schema import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TOOL_CALL_RESULTS,
    TURN_CONTROL_REQUESTS,
)
from dex_agents.ports.step_waits import ChannelCondition, WaitResult
from tests.app.harness import echo
from tests.app.scripted_runner import ScriptedRunner
from tests.app.turn_control_fakes import (
    ACTIVE,
    CANCELLED,
    DRAFT,
    IDLE,
    LOCKED,
    NOW,
    STEER_TEXT,
    STEERED,
    STEERS,
    WAKE,
    WAKES,
    WOKEN,
    FakeStepContext,
    FakeWaitContext,
    record,
    runtime,
    staged,
    written_record,
)


@pytest.mark.parametrize(
    ("case", "agent_state", "values", "channels", "attempt", "fields", "reason"),
    [
        ("steered", ACTIVE, {}, STEERED, 1, {}, CancellationReason.STEERED),
        ("cancelled", ACTIVE, CANCELLED, STEERED, 1, {}, CancellationReason.TURN_CANCELLED),
        ("neither", ACTIVE, {}, {}, 1, {}, None),
        ("a retry", ACTIVE, {}, STEERED, 2, {}, None),
        ("a started task", ACTIVE, {}, STEERED, 1, {"task_id": "t"}, None),
        ("another turn", ACTIVE, {}, STEERED, 1, {"turn_id": "turn-0"}, None),
        ("no turn control", LOCKED, {}, STEERED, 1, {}, None),
    ],
)
def test_a_tool_step_cancels_its_call_before_the_tool_starts(
    case: str,
    agent_state: AgentState,
    values: dict[AttributeDef[Any], Any],
    channels: dict[ChannelDef[Any], list[Any]],
    attempt: int,
    fields: dict[str, Any],
    reason: CancellationReason | None,
) -> None:
    approved = record("c", ToolCallStatus.APPROVED, **fields)
    context = FakeStepContext(staged(agent_state, values=values, channels=channels), attempt)
    decision = cancel_before_start(context, runtime(), approved)
    if reason is None:
        assert decision is None, case
        assert not context.state.has_effects
        return
    assert decision is not None
    assert decision.kind is DecisionKind.END
    assert written_record(context.state, "c").status is ToolCallStatus.REJECTED
    assert written_record(context.state, "c").cancellation_reason is reason
    assert [p.channel for p in context.state.publishes] == [TOOL_CALL_RESULTS.name]


@pytest.mark.parametrize(
    ("status", "turn_id", "expected"),
    [
        (AgentStatus.RUNNING_MODEL, "turn-1", ApplyTurnControl),
        (AgentStatus.COMPACTING_CONTEXT, "turn-1", ApplyTurnControl),
        (AgentStatus.RUNNING_MODEL, "turn-0", None),
    ],
)
async def test_finish_turn_cancellation_after_a_cancelled_model_call(
    status: AgentStatus, turn_id: str, expected: type | None
) -> None:
    agent_state = AgentState(status=status, active_turn_id="turn-1")
    context = FakeStepContext(staged(agent_state))
    decision = await FinishTurnCancellation(runtime()).execute(context, turn_id)
    assert [movement.step for movement in decision.movements] == ([expected] if expected else [])


async def test_a_due_durable_wait_keeps_its_result_under_a_limit_lowered_since_it_started() -> None:
    # Before, FinishTurnCancellation checked the arguments against today's
    # max_durable_wait, so a 60 second wait that had run recorded turn_cancelled once the
    # limit was lowered to 30 seconds; AwaitTimer itself completes such a wait.
    fired = record(
        "fired",
        ToolCallStatus.WAITING_FOR_TIMER,
        tool_name="durable_wait",
        built_in=True,
        arguments='{"duration_seconds": 60, "reason": "cool down"}',
        wait_until=NOW - timedelta(seconds=1),
        wait_reason="cool down",
    )
    state = staged(ACTIVE, records=[fired])
    lowered = runtime(max_durable_wait=timedelta(seconds=30))
    await FinishTurnCancellation(lowered).execute(FakeStepContext(state), "turn-1")
    written = written_record(state, "fired")
    assert (written.status, written.output, written.cancellation_reason) == (
        ToolCallStatus.SUCCEEDED,
        durable_wait_output(60, "cool down"),
        None,
    )


async def test_finish_turn_cancellation_records_every_cancelled_wait() -> None:
    due = NOW - timedelta(seconds=1)
    records = [
        record("approval", ToolCallStatus.AWAITING_APPROVAL, deferral_order=0),
        record("task", ToolCallStatus.WAITING_FOR_TASK, task_id="t-9", deferral_order=1),
        record(
            "fired",
            ToolCallStatus.WAITING_FOR_TIMER,
            tool_name="durable_wait",
            built_in=True,
            arguments='{"duration_seconds": 60, "reason": "cool down"}',
            wait_until=due,
            wait_reason="cool down",
            deferral_order=2,
        ),
        record("ask", ToolCallStatus.APPROVED, tool_name="ask_user", built_in=True),
        record("running", ToolCallStatus.APPROVED, deferral_order=4),
    ]
    interrupt = AgentInterrupt(
        interrupt_id="approval",
        tool_call_id="approval",
        tool_name="refund",
        kind=InterruptKind.APPROVAL,
        turn_id="turn-1",
    )
    state = staged(ACTIVE, values={PENDING_INTERRUPTS: (interrupt,)}, records=records)
    context = FakeStepContext(state)
    decision = await FinishTurnCancellation(runtime()).execute(context, "turn-1")
    (movement,) = decision.movements
    assert (movement.step, movement.input) == (CancelToolTask, "task")
    approval = written_record(state, "approval")
    assert (approval.status, approval.cancellation_reason) == (
        ToolCallStatus.REJECTED,
        CancellationReason.TURN_CANCELLED,
    )
    assert written_record(state, "ask").cancellation_reason is CancellationReason.TURN_CANCELLED
    fired = written_record(state, "fired")
    assert (fired.status, fired.output) == (
        ToolCallStatus.SUCCEEDED,
        durable_wait_output(60, "cool down"),
    )
    assert (AGENT_TOOL_CALLS.name, "running") not in state.writes
    assert (AGENT_TOOL_CALLS.name, "task") not in state.writes
    assert state.get(PENDING_INTERRUPTS) == ()
    assert [p.channel for p in state.publishes] == [TOOL_CALL_RESULTS.name] * 3
    events = [from_json(text, AgentEvent) for _, text in state.events]
    resolved = [e.payload for e in events if e.type == "interrupt_resolved"]
    assert resolved == [
        InterruptResolvedPayload(
            interrupt_id="approval",
            approved=False,
            rejection_message=None,
            kind=InterruptKind.APPROVAL,
            answered=False,
            cancellation_reason=CancellationReason.TURN_CANCELLED,
        )
    ]


@dataclass
class CancellingRunner(ScriptedRunner):
    cancelled_tasks: list[ToolTaskCancellation] = field(default_factory=list)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled_tasks.append(cancellation)


@pytest.mark.parametrize("runner", [CancellingRunner(), ScriptedRunner()])
async def test_cancel_tool_task_abandons_the_task(runner: ScriptedRunner) -> None:
    task = record("task", ToolCallStatus.WAITING_FOR_TASK, task_id="t-9")
    state = staged(ACTIVE, records=[task])
    decision = await CancelToolTask(runtime(runner)).execute(FakeStepContext(state), "task")
    assert decision.kind is DecisionKind.END
    abandoned = written_record(state, "task")
    assert (abandoned.status, abandoned.cancellation_reason) == (
        ToolCallStatus.OUTCOME_UNKNOWN,
        CancellationReason.TURN_CANCELLED,
    )
    assert [p.channel for p in state.publishes] == [TOOL_CALL_RESULTS.name]
    if isinstance(runner, CancellingRunner):
        assert [(c.tool_call.task_id, c.attempt) for c in runner.cancelled_tasks] == [("t-9", 1)]


@pytest.mark.parametrize(
    ("case", "channels", "expected"),
    [
        ("stale wakes first", {**WOKEN, TURN_CONTROL_REQUESTS: [WAKE, WAKE]}, [(WAKES, 2)]),
        ("then every steered message", {STEERED_USER_MESSAGES: [STEER_TEXT] * 3}, [(STEERS, 3)]),
        ("nothing to consume", {}, []),
    ],
)
async def test_apply_turn_control_consumes_every_wake_then_every_steered_message(
    case: str, channels: dict[ChannelDef[Any], list[Any]], expected: list[tuple[str, int]]
) -> None:
    wait = await ApplyTurnControl(runtime()).wait_for(
        FakeWaitContext(staged(ACTIVE, channels=channels)), None
    )
    got = [
        (condition.channel.name, condition.count)
        for condition in wait.conditions
        if isinstance(condition, ChannelCondition)
    ]
    assert got == expected, case


@pytest.mark.parametrize(
    ("plan", "plan_key"),
    [
        (None, None),
        (DRAFT, "3"),
        (AgentPlan(revision=4, status=PlanStatus.ACTIVE), "4"),
        (AgentPlan(revision=5, status=PlanStatus.COMPLETED), None),
    ],
)
async def test_await_user_message_waits_for_a_wake_a_message_then_the_current_approval(
    plan: AgentPlan | None, plan_key: str | None
) -> None:
    values: dict[AttributeDef[Any], Any] = {} if plan is None else {AGENT_PLAN: plan}
    wait = await AwaitUserMessage(runtime()).wait_for(
        FakeWaitContext(staged(IDLE, values=values)), None
    )
    got = [(c.channel.name, c.key) for c in wait.conditions if isinstance(c, ChannelCondition)]
    expected: list[tuple[str, str | None]] = [(WAKES, None), (QUEUED_USER_MESSAGES.name, None)]
    if plan_key is not None:
        expected.append(("PlanExecutions", plan_key))
    assert got == expected


@pytest.mark.parametrize(
    ("message", "pending", "next_step", "pending_deleted"),
    [
        (WAKE, None, ApplyTurnControl, False),
        # An approval of a revision a later turn replaced is dropped, and waits again.
        (
            PlanExecutionRequest(revision=2),
            PlanExecutionRequest(revision=2),
            AwaitUserMessage,
            True,
        ),
        (PlanExecutionRequest(revision=2), None, AwaitUserMessage, False),
    ],
)
async def test_await_user_message_on_a_wake_or_a_stale_approval(
    message: object,
    pending: PlanExecutionRequest | None,
    next_step: type,
    pending_deleted: bool,
) -> None:
    values: dict[AttributeDef[Any], Any] = {AGENT_PLAN: DRAFT}
    if pending is not None:
        values[PENDING_PLAN_EXECUTION] = pending
    state = staged(IDLE, values=values)
    context = FakeStepContext(state, wait_result=WaitResult(0, False, (message,)))
    decision = await AwaitUserMessage(runtime()).execute(context, None)
    assert [movement.step for movement in decision.movements] == [next_step]
    key = (PENDING_PLAN_EXECUTION.name, "")
    assert (key in state.writes and state.writes[key] is None) is pending_deleted
    assert state.get(AGENT_PLAN) == DRAFT  # a stale approval changes no plan
    assert (AGENT_STATE.name, "") not in state.writes  # and starts no turn


@pytest.mark.parametrize(
    ("effect", "step", "durable"),
    [
        ("read", CallTool, False),
        ("idempotent_write", CallTool, True),
        ("non_idempotent_write", CallSingleAttemptTool, True),
        ("unclassified", CallSingleAttemptTool, True),
    ],
)
async def test_a_tool_steps_start_mark_waits_for_the_disk_unless_it_is_a_read(
    effect: str, step: type[CallTool | CallSingleAttemptTool], durable: bool
) -> None:
    runner = ScriptedRunner(tools={"refund": echo})
    state = staged(ACTIVE, records=[record("c1", ToolCallStatus.APPROVED, effect=effect)])
    context = FakeStepContext(state)
    await step(runtime(runner)).execute(context, "c1")
    assert len(runner.tool_calls) == 1
    assert context.heartbeats[0] == (None, durable)
