"""The session Flow as Dex sees it: Registry, schema, Step options and RPCs, against the spec's tables."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import dex
import pytest

from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents.app.steps.builtin_steps import timer_movement
from dex_agents.app.steps.questions import question_movement
from dex_agents.app.steps.tool_tasks import poll_movement
from dex_agents.app.tool_step_movements import approval_movement, tool_step_movement
from dex_agents.domain.session_graph import SESSION_FLOW_NODES
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from tests.app.scripted_runner import ScriptedRunner

# The Flow-shape table's Steps, as the session graph records them from the spec.
FLOW_SHAPE_STEPS = {node.step_type for node in SESSION_FLOW_NODES}

# The spec's persistence table: name -> Dex kind.
PERSISTENCE = {
    "AgentState": dex.Attribute,
    "AgentMessages": dex.AttributeMap,
    "AgentMessageChunks": dex.AttributeMap,
    "AgentMessageIndex": dex.Attribute,
    "TurnReplySequence": dex.Attribute,
    "FrameworkRunState": dex.Attribute,
    "AgentToolCalls": dex.AttributeMap,
    "PendingInterrupts": dex.Attribute,
    "AgentUsage": dex.Attribute,
    "QueuedUserMessages": dex.Channel,
    "InterruptResolutions": dex.ChannelMap,
    "ToolCallResults": dex.Channel,
    "SteeredUserMessages": dex.Channel,
    "TurnControlRequests": dex.Channel,
    "TurnCancellationRequest": dex.Attribute,
    "ToolCallCancellations": dex.ChannelMap,
    "AgentTraceContext": dex.Attribute,
    "AgentPlan": dex.Attribute,
    "PlanExecutions": dex.ChannelMap,
    "PendingPlanExecution": dex.Attribute,
    "ContextSummary": dex.Attribute,
    "SessionSettings": dex.Attribute,
    "TurnSessionSettings": dex.Attribute,
    "AgentEvents": dex.Stream,
}

# The spec's RPC table (plus update_session_settings from "Session settings"):
# name -> (locks, is_transactional, loaded AttributeMaps, loaded Channels).
RPCS: dict[str, tuple[tuple[str, ...], bool, tuple[str, ...], tuple[str, ...]]] = {
    "send_user_message": ((), True, (), ()),
    "execute_plan": (("PendingPlanExecution",), False, (), ()),
    "steer_user_message": ((), True, (), ("QueuedUserMessages", "SteeredUserMessages")),
    "delete_queued_message": ((), True, (), ("QueuedUserMessages",)),
    "cancel_turn": (("TurnCancellationRequest", "PendingInterrupts"), False, (), ()),
    "resolve_interrupt": (("PendingInterrupts",), False, (), ()),
    "answer_question": (("PendingInterrupts",), False, (), ()),
    "update_session_settings": ((), True, (), ()),
    "get_agent_snapshot": (
        (),
        False,
        ("AgentMessages", "AgentMessageChunks", "AgentToolCalls"),
        ("QueuedUserMessages", "SteeredUserMessages"),
    ),
    "list_agent_messages": ((), False, ("AgentMessages", "AgentMessageChunks"), ()),
}


def _flow() -> AgentSessionFlow:
    return AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")


def _registered(flow: AgentSessionFlow) -> Any:
    registry = dex.Registry([flow], allow_async_handlers=True)
    return registry._registered_flows[flow.flow_type]


def _record(effect: ToolEffect, *, requires_approval: bool = False) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id="call-7",
        tool_name="refund_order",
        arguments='{"order_id":"7"}',
        turn_id="turn-1",
        effect=effect,
        requires_approval=requires_approval,
        status=ToolCallStatus.APPROVED,
        deferral_order=0,
    )


def test_the_registry_accepts_the_session_flow_with_every_step_of_the_flow_shape() -> None:
    registered = _registered(_flow())
    assert set(registered.steps) == FLOW_SHAPE_STEPS
    assert registered.start_step.name == "StartAgentSession"


def test_two_agents_register_side_by_side_each_with_its_own_stream() -> None:
    first, second = _flow(), AgentSessionFlow(ScriptedRunner(), flow_type="SupportAgent")
    registry = dex.Registry([first, second], allow_async_handlers=True)
    assert set(registry._registered_flows) == {"TriageAgent", "SupportAgent"}


def test_the_schema_has_the_spec_names_and_kinds() -> None:
    registered = _registered(_flow())
    kinds = {name: type(definition) for name, definition in registered.persistence.items()}
    assert kinds == PERSISTENCE


def test_session_values_travel_as_json_text_and_primitives_natively() -> None:
    schema = _flow().dex_schema.definitions
    assert schema["AgentState"].value_type is str
    assert schema["FrameworkRunState"].value_type is str
    assert schema["AgentTraceContext"].value_type is str


@pytest.mark.parametrize("name", sorted(RPCS))
def test_every_rpc_is_registered_with_the_spec_locks_and_loads(name: str) -> None:
    locks, transactional, maps, channels = RPCS[name]
    rpc = _registered(_flow()).rpcs[name]
    assert tuple(lock.attribute.name for lock in rpc.options.lock_attributes) == locks
    assert rpc.options.is_transactional is transactional
    assert tuple(m.name for m in rpc.options.load_attribute_maps) == maps
    assert tuple(c.name for c in rpc.options.load_channels) == channels


def test_the_rpcs_are_the_flow_methods_an_async_client_takes() -> None:
    flow = _flow()
    registry = dex.Registry([flow], allow_async_handlers=True)
    _, rpc = registry._rpc_for_method(flow.send_user_message)
    assert rpc.name == "send_user_message"
    assert flow.dex_rpc_method("get_agent_snapshot") == flow.get_agent_snapshot
    with pytest.raises(LookupError, match="has no RPC nope"):
        flow.dex_rpc_method("nope")


def _options(flow: AgentSessionFlow, step_type: str) -> dex.StepOptions:
    step = next(s for s in flow.dex_binding.dex_steps.values() if s.get_step_type() == step_type)
    options = step.get_step_options()
    assert options is not None
    return options


# Step -> (execute timeout, heartbeat timeout, attempts, total duration, failure route)
STATIC_OPTIONS: dict[str, tuple[timedelta, timedelta, int, timedelta | None, str | None]] = {
    "RunModel": (
        timedelta(minutes=15),
        timedelta(minutes=2),
        3,
        timedelta(minutes=30),
        "RecordTurnFailure",
    ),
    "CompactContext": (
        timedelta(minutes=15),
        timedelta(minutes=2),
        3,
        timedelta(minutes=30),
        "RecordTurnFailure",
    ),
    "CancelToolTask": (
        timedelta(seconds=30),
        timedelta(minutes=1),
        3,
        timedelta(minutes=2),
        "RecordToolOutcomeUnknown",
    ),
}


@pytest.mark.parametrize("step_type", sorted(STATIC_OPTIONS))
def test_static_step_options_match_the_flow_shape_table(step_type: str) -> None:
    timeout, heartbeat, attempts, total, failure = STATIC_OPTIONS[step_type]
    options = _options(_flow(), step_type)
    assert options.execute_method_timeout == timeout
    assert options.heartbeat_timeout == heartbeat
    assert options.execute_retry is not None
    assert options.execute_retry.maximum_attempts == attempts
    assert options.execute_retry.total_duration == total
    target = options._execute_failure_target
    assert (None if target is None else target.get_step_type(target())) == failure


@pytest.mark.parametrize("step_type", sorted(FLOW_SHAPE_STEPS))
def test_every_step_sets_sync_durability_for_both_methods(step_type: str) -> None:
    options = _options(_flow(), step_type)
    assert options.wait_for_durability is dex.StepDurability.SYNC
    assert options.execute_durability is dex.StepDurability.SYNC


@pytest.mark.parametrize(
    ("effect", "step_type", "attempts", "failure"),
    [
        (ToolEffect.READ, "CallTool", 3, "RecordToolFailure"),
        (ToolEffect.IDEMPOTENT_WRITE, "CallTool", 3, "RecordToolFailure"),
        (ToolEffect.NON_IDEMPOTENT_WRITE, "CallSingleAttemptTool", 1, "RecordToolOutcomeUnknown"),
        (ToolEffect.UNCLASSIFIED, "CallSingleAttemptTool", 1, "RecordToolOutcomeUnknown"),
    ],
)
def test_a_tool_step_movement_loads_only_its_own_record_and_routes_failures_by_effect(
    effect: ToolEffect, step_type: str, attempts: int, failure: str
) -> None:
    flow = _flow()
    (movement,) = flow.dex_binding.movements([tool_step_movement(flow.runtime, _record(effect))])
    assert movement.step.get_step_type(movement.step()) == step_type
    assert movement.input == "call-7"
    options = movement.options
    assert options is not None
    assert options.execute_retry is not None
    assert options.execute_retry.maximum_attempts == attempts
    assert options.heartbeat_timeout == timedelta(minutes=1)
    assert [load.physical_name for load in options.execute_load_attribute_map_instances] == [
        "AgentToolCalls/call-7"
    ]
    assert options.execute_load_attribute_maps == ()
    target = options._execute_failure_target
    assert target is not None
    assert target.get_step_type(target()) == failure
    restated = options._execute_failure_options
    assert restated is not None
    assert [m.name for m in restated.execute_load_attribute_maps] == ["AgentToolCalls"]


def test_an_approval_movement_locks_pending_interrupts_and_loads_its_own_record() -> None:
    flow = _flow()
    record = _record(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
    (movement,) = flow.dex_binding.movements([approval_movement(record)])
    options = movement.options
    assert options is not None
    assert [lock.attribute.name for lock in options.execute_lock_attributes] == [
        "PendingInterrupts"
    ]
    for loads in (
        options.execute_load_attribute_map_instances,
        options.wait_for_load_attribute_map_instances,
    ):
        assert [load.physical_name for load in loads] == ["AgentToolCalls/call-7"]


@pytest.mark.parametrize(
    ("effect", "failure"),
    [
        (ToolEffect.READ, "RecordToolFailure"),
        (ToolEffect.IDEMPOTENT_WRITE, "RecordToolFailure"),
        (ToolEffect.NON_IDEMPOTENT_WRITE, "RecordToolOutcomeUnknown"),
        (ToolEffect.UNCLASSIFIED, "RecordToolOutcomeUnknown"),
    ],
)
def test_a_poll_movement_retries_three_times_and_routes_by_effect(
    effect: ToolEffect, failure: str
) -> None:
    flow = _flow()
    (movement,) = flow.dex_binding.movements([poll_movement(flow.runtime, _record(effect))])
    options = movement.options
    assert options is not None
    assert options.execute_retry is not None
    assert options.execute_retry.maximum_attempts == 3
    target = options._execute_failure_target
    assert target is not None
    assert target.get_step_type(target()) == failure
    for loads in (
        options.execute_load_attribute_map_instances,
        options.wait_for_load_attribute_map_instances,
    ):
        assert [load.physical_name for load in loads] == ["AgentToolCalls/call-7"]


@pytest.mark.parametrize(
    ("movement_of", "step_type", "locks"),
    [
        (lambda record: question_movement(record), "AwaitQuestionAnswer", ["PendingInterrupts"]),
        # A durable wait not started yet locks PendingInterrupts, as ResumeTurn does.
        (lambda record: timer_movement(record), "AwaitTimer", ["PendingInterrupts"]),
    ],
    ids=["question", "timer"],
)
def test_question_and_timer_movements_load_only_their_own_record(
    movement_of: Any, step_type: str, locks: list[str]
) -> None:
    flow = _flow()
    (movement,) = flow.dex_binding.movements([movement_of(_record(ToolEffect.READ))])
    assert movement.step.get_step_type(movement.step()) == step_type
    options = movement.options
    assert options is not None
    assert [lock.attribute.name for lock in options.execute_lock_attributes] == locks
    assert [load.physical_name for load in options.wait_for_load_attribute_map_instances] == [
        "AgentToolCalls/call-7"
    ]


def test_run_model_limits_from_the_options_reach_dex_in_whole_seconds() -> None:
    from dex_agents import RunModelLimit

    options = AgentSessionOptions(
        run_model_limit=RunModelLimit(
            timeout=timedelta(seconds=90.5),
            heartbeat_timeout=timedelta(seconds=20),
            maximum_attempts=2,
            total_duration=timedelta(minutes=5),
        )
    )
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent", options=options)
    mapped = _options(flow, "RunModel")
    assert mapped.execute_method_timeout == timedelta(seconds=91)
    assert mapped.heartbeat_timeout == timedelta(seconds=20)
    assert mapped.execute_retry is not None
    assert mapped.execute_retry.maximum_attempts == 2


def test_an_rpc_never_hides_an_attribute_of_the_flow() -> None:
    class Clashing(AgentSessionFlow):
        def get_agent_snapshot(self) -> None:
            """A method named like an RPC."""

    with pytest.raises(ValueError, match="RPC get_agent_snapshot would hide"):
        _ = Clashing(ScriptedRunner(), flow_type="TriageAgent").dex_binding
