"""The enum fields of the values a turn builds most: a member kept, its text converted,
anything else refused, as calling the enum class does."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

import pytest

from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole
from dex_agents.domain.state import AgentState, AgentStatus, InteractionMode
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallCompleted, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, tool_step_for_effect


def _tool_call(**fields: Any) -> AgentToolCall:
    base: dict[str, Any] = {
        "tool_call_id": "call-1",
        "tool_name": "lookup",
        "arguments": "{}",
        "turn_id": "turn-1",
        "effect": ToolEffect.READ,
        "requires_approval": False,
        "deferral_order": 0,
        "status": ToolCallStatus.APPROVED,
    }
    return AgentToolCall(**{**base, **fields})


_BUILDS: list[tuple[str, type[StrEnum], Callable[[Any], Any]]] = [
    ("status", AgentStatus, lambda value: AgentState(status=value)),
    (
        "interaction_mode",
        InteractionMode,
        lambda value: AgentState(status=AgentStatus.RUNNING_MODEL, interaction_mode=value),
    ),
    ("role", MessageRole, lambda value: FrameworkMessage(role=value, framework_item="{}")),
    (
        "role",
        MessageRole,
        lambda value: AgentMessage(sequence=1, turn_id="turn-1", role=value, framework_item="{}"),
    ),
    ("effect", ToolEffect, lambda value: _tool_call(effect=value)),
    ("status", ToolCallStatus, lambda value: _tool_call(status=value)),
    ("status", ToolCallStatus, lambda value: ToolCallCompleted(tool_call_id="c", status=value)),
]


@pytest.mark.parametrize(("field", "enum", "build"), _BUILDS)
def test_a_member_is_kept_and_its_text_converted(
    field: str, enum: type[StrEnum], build: Callable[[Any], Any]
) -> None:
    for member in enum:
        assert getattr(build(member), field) is member
        assert getattr(build(member.value), field) is member


@pytest.mark.parametrize("value", ["no-such-member", None, 1, True, b"user", ("user",)])
@pytest.mark.parametrize(("field", "enum", "build"), _BUILDS)
def test_a_value_of_no_member_is_refused(
    field: str, enum: type[StrEnum], build: Callable[[Any], Any], value: object
) -> None:
    # Not only text: a converter that let a value of another type through as it is would
    # leave a field that neither the wire form nor the enum's members hold.
    with pytest.raises(ValueError, match="is not a valid"):
        build(value)


def test_an_effect_given_as_a_member_or_its_text_finds_its_rules() -> None:
    assert tool_step_for_effect(ToolEffect.READ) is tool_step_for_effect("read")
    with pytest.raises(ValueError, match="unknown tool effect"):
        tool_step_for_effect("no-such-effect")
