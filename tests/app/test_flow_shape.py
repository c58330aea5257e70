"""The session Flow has every Step and RPC of the spec's Flow-shape and RPC tables, by name."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.session_flow import PortableSessionFlow
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.ports.engine import StepDurability
from tests.app.scripted_runner import ScriptedRunner

SPEC_STEPS = {
    "StartAgentSession",
    "AwaitUserMessage",
    "RunModel",
    "CompactContext",
    "AwaitToolApproval",
    "AwaitQuestionAnswer",
    "AwaitTimer",
    "CallTool",
    "CallSingleAttemptTool",
    "PollToolTask",
    "RecordToolFailure",
    "RecordToolOutcomeUnknown",
    "ResumeTurn",
    "ApplyTurnControl",
    "RecordTurnFailure",
    "FinishTurnCancellation",
    "CancelToolTask",
}

SPEC_RPCS = {
    "send_user_message",
    "execute_plan",
    "steer_user_message",
    "delete_queued_message",
    "cancel_turn",
    "resolve_interrupt",
    "answer_question",
    "get_agent_snapshot",
    "list_agent_messages",
    "update_session_settings",
}


@pytest.fixture
def flow() -> AgentSessionFlow:
    return AgentSessionFlow(ScriptedRunner(), flow_type="ShapeAgent")


def test_every_step_of_the_flow_shape_table_is_registered(flow: AgentSessionFlow) -> None:
    assert {step.step_type for step in flow.steps} == SPEC_STEPS
    assert flow.start_step.step_type == "StartAgentSession"


def test_every_rpc_of_the_rpc_table_is_registered(flow: AgentSessionFlow) -> None:
    assert set(flow.rpcs) == SPEC_RPCS


def test_every_step_sets_sync_durability(flow: AgentSessionFlow) -> None:
    assert {step.step_type: step.options().durability for step in flow.steps} == dict.fromkeys(
        SPEC_STEPS, StepDurability.SYNC
    )


def test_run_model_has_the_spec_timeouts_attempts_and_failure_route(flow: AgentSessionFlow) -> None:
    (run_model,) = [step for step in flow.steps if step.step_type == "RunModel"]
    options = run_model.options()
    assert options.execute_timeout == timedelta(minutes=15)
    assert options.heartbeat_timeout == timedelta(minutes=2)
    assert options.retry.maximum_attempts == 3
    assert options.retry.total_duration == timedelta(minutes=30)
    assert options.failure_step is not None
    assert options.failure_step.step_type == "RecordTurnFailure"


def test_the_event_stream_is_flow_agent_events(flow: AgentSessionFlow) -> None:
    # flow.agent_events is the Stream Dex registered; flow.stream the port's declaration.
    assert flow.agent_events is flow.dex_schema.stream
    assert flow.agent_events.name == flow.stream.name == "AgentEvents"
    assert flow.agent_events.stream_capacity_bytes == 10 * 1024 * 1024
    assert flow.stream.capacity_bytes == 10 * 1024 * 1024
    portable = PortableSessionFlow(ScriptedRunner(), flow_type="TestAgent")
    assert portable.agent_events is portable.stream


def test_a_compaction_policy_needs_a_compaction_runner() -> None:
    with pytest.raises(TypeError, match="ContextCompactionRunner"):
        AgentSessionFlow(
            ScriptedRunner(),
            flow_type="ShapeAgent",
            options=AgentSessionOptions(compaction=CompactionPolicy(context_window_tokens=1000)),
        )


@pytest.mark.parametrize(
    ("flow_type", "error", "message"),
    [
        ("", ValueError, "flow_type must not be blank"),
        ("  ", ValueError, "flow_type must not be blank"),
        ("a/b", ValueError, "flow_type must not contain '/': 'a/b'"),
        (5, TypeError, "flow_type must be a str, not int"),
        (None, TypeError, "flow_type must be a str, not NoneType"),
        (
            "Agent\ud800",
            ValueError,
            "flow_type is not valid Unicode text: it has a lone surrogate U+D800 at index 5",
        ),
    ],
)
def test_a_flow_type_is_a_name(flow_type: Any, error: type[Exception], message: str) -> None:
    # The session graph document's rule for the same name, so every Flow has a graph.
    with pytest.raises(error) as raised:
        AgentSessionFlow(ScriptedRunner(), flow_type=flow_type)
    assert str(raised.value) == message


class _NoRunner:
    """Has the contract's methods but runs the model call without ``async``."""

    def build_user_message(self, text: str) -> Any:
        return ScriptedRunner().build_user_message(text)

    def run_model_step(self, turn: Any) -> Any:
        return None

    async def execute_deferred_tool_call(self, call: Any) -> Any:
        return None


@pytest.mark.parametrize(
    ("runner", "message"),
    [
        (object(), "object has no build_user_message, run_model_step, execute_deferred_tool_call"),
        (None, "NoneType has no build_user_message, run_model_step, execute_deferred_tool_call"),
        (_NoRunner(), "run_model_step of _NoRunner must be a coroutine function (async def)"),
    ],
)
def test_a_runner_must_implement_the_runner_contract(runner: Any, message: str) -> None:
    # Taken, it failed StartAgentSession on every attempt and left a session without state.
    with pytest.raises(TypeError) as raised:
        AgentSessionFlow(runner, flow_type="ShapeAgent")
    assert str(raised.value) == (
        f"runner must implement the runner contract (AgentFrameworkRunner): {message}"
    )


@pytest.mark.parametrize("options", [{}, {"compaction": None}, "options"])
def test_options_must_be_agent_session_options(options: Any) -> None:
    with pytest.raises(TypeError) as raised:
        AgentSessionFlow(ScriptedRunner(), flow_type="ShapeAgent", options=options)
    assert str(raised.value) == (
        f"options must be an AgentSessionOptions or None, not {type(options).__name__}"
    )
