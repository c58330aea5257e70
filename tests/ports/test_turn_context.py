"""``AgentTurnContext`` and ``DeferredToolExecution``: defaults, policies, records, freezing."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace

import pytest

from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from tests.ports.turn_fakes import Heartbeats, execution, record, turn_context

POLICIES = {
    "search_tickets": ToolPolicy(ToolEffect.READ),
    "refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
}


@pytest.mark.parametrize(
    ("name", "framework_effect", "default", "expected"),
    [
        ("search_tickets", None, ToolEffect.UNCLASSIFIED, ToolPolicy(ToolEffect.READ)),
        (
            "search_tickets",
            ToolEffect.NON_IDEMPOTENT_WRITE,
            ToolEffect.UNCLASSIFIED,
            ToolPolicy(ToolEffect.READ),
        ),
        (
            "refund_order",
            ToolEffect.READ,
            ToolEffect.UNCLASSIFIED,
            ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
        ),
        ("mcp__files__read", ToolEffect.READ, ToolEffect.UNCLASSIFIED, ToolPolicy(ToolEffect.READ)),
        (
            "mcp__files__put",
            ToolEffect.IDEMPOTENT_WRITE,
            ToolEffect.READ,
            ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
        ),
        ("send_email", None, ToolEffect.UNCLASSIFIED, ToolPolicy(ToolEffect.UNCLASSIFIED)),
        ("send_email", None, ToolEffect.READ, ToolPolicy(ToolEffect.READ)),
    ],
    ids=[
        "explicit",
        "explicit-beats-framework",
        "explicit-keeps-approval",
        "framework-read",
        "framework-beats-default",
        "default-unclassified",
        "default-read",
    ],
)
def test_resolve_tool_policy_prefers_explicit_then_framework_then_default(
    name: str, framework_effect: ToolEffect | None, default: ToolEffect, expected: ToolPolicy
) -> None:
    turn = turn_context(tool_policies=POLICIES, default_tool_effect=default)
    assert turn.resolve_tool_policy(name, framework_effect) == expected
    assert turn.resolve_tool_policy(name, framework_effect=framework_effect) == expected


def test_a_turn_context_has_the_spec_defaults() -> None:
    turn = turn_context()
    assert turn.framework_run_state is None
    assert turn.is_resuming is False
    assert turn.tool_calls == {}
    assert turn.default_tool_effect is ToolEffect.UNCLASSIFIED
    assert turn.enabled_built_in_tools == frozenset()
    assert turn.interaction_mode is InteractionMode.CHAT
    assert turn.session_settings == {}
    assert turn.context_summary is None
    assert turn.plan is None


def test_a_turn_resumes_from_its_run_state_and_reads_its_records() -> None:
    finished = record("call-7")
    turn = turn_context(
        framework_run_state='{"model_calls":1}',
        tool_calls={"call-7": finished},
        enabled_built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    assert turn.is_resuming is True
    assert turn.recorded_tool_call("call-7") is finished
    assert "ask_user" in turn.enabled_built_in_tools
    with pytest.raises(KeyError, match="turn turn-1 has no tool call record 'call-8'"):
        turn.recorded_tool_call("call-8")


def test_the_turn_context_is_frozen() -> None:
    turn = turn_context()
    with pytest.raises(FrozenInstanceError):
        turn.attempt = 2  # type: ignore[misc]
    assert replace(turn, attempt=2).attempt == 2


def test_a_deferred_execution_reads_its_turn_and_effect_from_the_record() -> None:
    call = execution(record(effect=ToolEffect.READ, turn_id="turn-3"), Heartbeats())
    assert call.turn_id == "turn-3"
    assert call.effect is ToolEffect.READ
    assert call.heartbeat_checkpoint is None
    assert call.input_answers == ()
    assert call.context is None
    assert call.supports_tool_tasks is False
