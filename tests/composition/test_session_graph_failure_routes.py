"""Dex Web's session graph has a failure edge for every failure route the session Flow declares.

A failure route is declared by a Step's own options or by the options of the
movement that starts it (per tool call, by the call's effect); a route the
graph lacks is a movement Dex Web cannot draw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.app.steps.builtin_steps import timer_movement
from dex_agents.app.steps.cancel_tool_task import cancel_tool_task_movement
from dex_agents.app.steps.questions import question_movement
from dex_agents.app.steps.tool_tasks import poll_movement
from dex_agents.app.tool_step_movements import approval_movement, tool_step_movement
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.ports.engine import StepMovement
from dex_agents.session_graph import SESSION_FLOW_EDGES, SessionFlowEdgeKind
from tests.app.scripted_runner import ScriptedRunner

FLOW = AgentSessionFlow(ScriptedRunner(), flow_type="GraphAgent")
RUNTIME = FLOW.runtime

DRAWN_FAILURE_ROUTES = {
    (edge.source, edge.target)
    for edge in SESSION_FLOW_EDGES
    if edge.kind is SessionFlowEdgeKind.FAILURE_ROUTE
}


def _record(effect: ToolEffect) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id="call-1",
        tool_name="refund_order",
        arguments="{}",
        turn_id="turn-1",
        effect=effect,
        requires_approval=False,
        status=ToolCallStatus.APPROVED,
        deferral_order=0,
    )


MOVEMENTS: dict[str, Callable[[AgentToolCall], StepMovement]] = {
    "tool Step": lambda record: tool_step_movement(RUNTIME, record),
    "approval": approval_movement,
    "question": question_movement,
    "durable wait": timer_movement,
    "task poll": lambda record: poll_movement(RUNTIME, record),
    "task cancellation": lambda record: cancel_tool_task_movement(record.tool_call_id),
}


def _step_type(step: Any) -> str:
    return type(step).__name__ if not isinstance(step, type) else step.__name__


@pytest.mark.parametrize("step", FLOW.steps, ids=_step_type)
def test_a_steps_own_failure_route_is_an_edge(step: Any) -> None:
    failure = step.options().failure_step
    if failure is not None:
        assert (_step_type(step), failure.__name__) in DRAWN_FAILURE_ROUTES


@pytest.mark.parametrize("effect", list(ToolEffect))
@pytest.mark.parametrize("movement_of", MOVEMENTS.values(), ids=MOVEMENTS.keys())
def test_a_movements_failure_route_is_an_edge(
    movement_of: Callable[[AgentToolCall], StepMovement], effect: ToolEffect
) -> None:
    movement = movement_of(_record(effect))
    assert movement.options is not None
    failure = movement.options.failure_step
    assert failure is not None
    assert (movement.step.__name__, failure.__name__) in DRAWN_FAILURE_ROUTES
