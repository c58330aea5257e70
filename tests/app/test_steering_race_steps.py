"""Races between steering or ``cancel_turn`` and waits that have not started yet, Step by Step
over a fake transaction: the first run of ``AwaitQuestionAnswer`` and ``AwaitTimer``,
``PollToolTask`` in a cancelled turn, and what a steer wake wakes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import pytest

from dex_agents.app.steps.builtin_steps import AwaitTimer, timer_movement
from dex_agents.app.steps.questions import AwaitQuestionAnswer
from dex_agents.app.steps.tool_tasks import PollToolTask
from dex_agents.app.steps.turn_control import FinishTurnCancellation
from dex_agents.app.steps.turn_end import cancel_steered_waits
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.wire import from_json
from dex_agents.ports.engine import AttributeLock, DecisionKind
from dex_agents.ports.persistence import AttributeDef, ChannelDef
from dex_agents.ports.session_schema import (
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    TOOL_CALL_CANCELLATIONS,
    TOOL_CALL_RESULTS,
)
from dex_agents.ports.step_waits import TimerCondition, WaitResult
from tests.app.steering_support import CancellableTaskRunner
from tests.app.turn_control_fakes import (
    ACTIVE,
    CANCELLED,
    NOW,
    STEERED,
    FakeStepContext,
    FakeWaitContext,
    record,
    runtime,
    staged,
    written_record,
)

FIRST_RUN = WaitResult(1, True, ())
ASK_ARGUMENTS = '{"question": "Proceed?"}'
WAIT_ARGUMENTS = '{"duration_seconds": 60, "reason": "cool down"}'


def built_in(name: str, arguments: str, **fields: Any) -> AgentToolCall:
    return record(
        "c",
        ToolCallStatus.APPROVED,
        tool_name=name,
        arguments=arguments,
        built_in=True,
        effect="read",
        **fields,
    )


TOOL_QUESTION = record(
    "c", ToolCallStatus.AWAITING_ANSWER, question="Which?", input_request_count=1
)
TASK_QUESTION = record(
    "c", ToolCallStatus.AWAITING_ANSWER, question="Which?", input_request_count=1, task_id="t-9"
)
ASK_CALL = built_in("ask_user", ASK_ARGUMENTS)
WAIT_CALL = built_in("durable_wait", WAIT_ARGUMENTS)
STARTED = {ToolCallStatus.AWAITING_ANSWER, ToolCallStatus.WAITING_FOR_TIMER}


@pytest.mark.parametrize(
    ("case", "call", "values", "channels", "status", "detail"),
    [
        ("ask_user, steered", ASK_CALL, {}, STEERED, ToolCallStatus.REJECTED, "steered"),
        ("ask_user, cancelled", ASK_CALL, CANCELLED, {}, ToolCallStatus.REJECTED, "turn_cancelled"),
        ("ask_user, neither", ASK_CALL, {}, {}, ToolCallStatus.AWAITING_ANSWER, None),
        (
            "invalid ask_user arguments fail at once, even when steered",
            built_in("ask_user", '{"question": " "}'),
            {},
            STEERED,
            ToolCallStatus.FAILED,
            "invalid ask_user arguments: question must be a non-blank string",
        ),
        (
            "a tool's question, steered",
            TOOL_QUESTION,
            {},
            STEERED,
            ToolCallStatus.REJECTED,
            "steered",
        ),
        (
            "a task's question, steered",
            TASK_QUESTION,
            {},
            STEERED,
            ToolCallStatus.AWAITING_ANSWER,
            None,
        ),
        ("durable_wait, steered", WAIT_CALL, {}, STEERED, ToolCallStatus.REJECTED, "steered"),
        (
            "durable_wait, cancelled",
            WAIT_CALL,
            CANCELLED,
            {},
            ToolCallStatus.REJECTED,
            "turn_cancelled",
        ),
        ("durable_wait, neither", WAIT_CALL, {}, {}, ToolCallStatus.WAITING_FOR_TIMER, None),
        (
            "invalid durable_wait arguments fail at once, even when steered",
            built_in("durable_wait", '{"duration_seconds": 5}'),
            {},
            STEERED,
            ToolCallStatus.FAILED,
            "invalid durable_wait arguments: reason is required",
        ),
    ],
)
async def test_a_wait_that_has_not_started_checks_the_turn_first(
    case: str,
    call: AgentToolCall,
    values: dict[AttributeDef[Any], Any],
    channels: dict[ChannelDef[Any], list[Any]],
    status: ToolCallStatus,
    detail: str | None,
) -> None:
    state = staged(ACTIVE, values=values, records=[call], channels=channels)
    context = FakeStepContext(state, wait_result=FIRST_RUN)
    step = (
        AwaitTimer(runtime())
        if call.tool_name == "durable_wait"
        else AwaitQuestionAnswer(runtime())
    )
    decision = await step.execute(context, "c")
    written = written_record(state, "c")
    assert written.status is status, case
    events = {from_json(text, AgentEvent).type for _, text in state.events}
    if status in STARTED:
        assert decision.kind is DecisionKind.GO
        assert [p.channel for p in state.publishes] == []
        assert events & {"interrupt_raised", "timer_started"}
        return
    assert decision.kind is DecisionKind.END
    assert (written.cancellation_reason or written.error) == detail
    assert [p.channel for p in state.publishes] == [TOOL_CALL_RESULTS.name]
    assert events == {"tool_call_finished"}
    assert (PENDING_INTERRUPTS.name, "") not in state.writes


def test_a_durable_wait_locks_pending_interrupts_only_until_it_has_started() -> None:
    # ResumeTurn locks it too, so a steer wake never misses a wait that starts meanwhile.
    waiting = attrs.evolve(WAIT_CALL, status=ToolCallStatus.WAITING_FOR_TIMER, wait_until=NOW)
    options = [timer_movement(call).options for call in (WAIT_CALL, waiting)]
    assert [None if o is None else o.locks for o in options] == [
        (AttributeLock(PENDING_INTERRUPTS),),
        (),
    ]


@pytest.mark.parametrize("raised", [False, True])
async def test_a_tasks_question_in_a_cancelled_turn_goes_to_finish_turn_cancellation(
    raised: bool,
) -> None:
    question = attrs.evolve(TASK_QUESTION, interrupt_id="c-input-1" if raised else None)
    state = staged(ACTIVE, values=CANCELLED, records=[question])
    context = FakeStepContext(state, wait_result=FIRST_RUN)
    decision = await AwaitQuestionAnswer(runtime()).execute(context, "c")
    assert [(m.step, m.input) for m in decision.movements] == [(FinishTurnCancellation, "turn-1")]
    assert not state.has_effects


WAITING_TASK = record(
    "c", ToolCallStatus.WAITING_FOR_TASK, task_id="t-9", task_poll_interval_seconds=30
)


@pytest.mark.parametrize(
    ("case", "values", "channels", "seconds"),
    [
        ("cancelled: no more polls", CANCELLED, {}, 0),
        ("steered: the task runs on", {}, STEERED, 30),
        ("neither", {}, {}, 30),
    ],
)
async def test_poll_tool_task_waits_no_longer_once_the_turn_is_cancelled(
    case: str,
    values: dict[AttributeDef[Any], Any],
    channels: dict[ChannelDef[Any], list[Any]],
    seconds: int,
) -> None:
    state = staged(ACTIVE, values=values, records=[WAITING_TASK], channels=channels)
    wait = await PollToolTask(runtime()).wait_for(FakeWaitContext(state), "c")
    timers = [c.duration for c in wait.conditions if isinstance(c, TimerCondition)]
    assert timers == [timedelta(seconds=seconds)], case


async def test_poll_tool_task_in_a_cancelled_turn_abandons_the_task_instead_of_polling() -> None:
    runner = CancellableTaskRunner()
    state = staged(ACTIVE, values=CANCELLED, records=[WAITING_TASK])
    context = FakeStepContext(state, wait_result=WaitResult(1, True, ()))
    decision = await PollToolTask(runtime(runner)).execute(context, "c")
    assert [(m.step, m.input) for m in decision.movements] == [(FinishTurnCancellation, "turn-1")]
    assert runner.polls == []
    assert not state.has_effects


FUTURE = NOW + timedelta(minutes=5)
RAISED = AgentInterrupt(
    interrupt_id="raised",
    tool_call_id="raised",
    tool_name="ask_user",
    kind=InterruptKind.QUESTION,
    turn_id="turn-1",
)


def test_a_steer_wake_wakes_only_the_waits_that_have_started() -> None:
    records = [
        record("ask", ToolCallStatus.APPROVED, tool_name="ask_user", built_in=True),
        record("wait", ToolCallStatus.APPROVED, tool_name="durable_wait", built_in=True),
        record("tool-question", ToolCallStatus.AWAITING_ANSWER, question="Which?"),
        record(
            "raised",
            ToolCallStatus.AWAITING_ANSWER,
            tool_name="ask_user",
            built_in=True,
            interrupt_id="raised",
        ),
        record(
            "waiting",
            ToolCallStatus.WAITING_FOR_TIMER,
            tool_name="durable_wait",
            built_in=True,
            wait_until=FUTURE,
        ),
    ]
    state = staged(
        ACTIVE, values={PENDING_INTERRUPTS: (RAISED,)}, records=records, channels=STEERED
    )
    cancel_steered_waits(FakeStepContext(state), runtime(), ACTIVE)
    assert [(p.channel, p.key) for p in state.publishes] == [
        (TOOL_CALL_CANCELLATIONS.name, "raised"),
        (TOOL_CALL_CANCELLATIONS.name, "waiting"),
    ]
    assert state.get(PENDING_INTERRUPTS) == ()
    assert not any(key[0] == AGENT_TOOL_CALLS.name for key in state.writes)
