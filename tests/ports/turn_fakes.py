"""Fakes of what a turn hands a runner: event writer, heartbeats, records, contexts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dex_agents.domain.events import EventPayload
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution

USAGE = AgentUsage(model_calls=1, input_tokens=3, output_tokens=1)


class FakeEventWriter:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def write_text_delta(self, text: str) -> None:
        self.events.append(("text_delta", text))

    def write_reasoning_delta(self, text: str) -> None:
        self.events.append(("reasoning_delta", text))

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        self.events.append(("tool_call_started", (tool_call_id, tool_name)))

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: ToolCallStatus
    ) -> None:
        self.events.append(("tool_call_finished", (tool_call_id, tool_name, status)))

    def write_event(self, event_type: str, payload: Mapping[str, Any] | EventPayload) -> None:
        self.events.append((event_type, payload))


class Heartbeats:
    def __init__(self) -> None:
        self.count = 0
        self.checkpoints: list[str] = []

    async def heartbeat(self) -> None:
        self.count += 1

    async def save(self, text: str) -> None:
        self.checkpoints.append(text)


def record(tool_call_id: str = "call-1", **changes: Any) -> AgentToolCall:
    fields: dict[str, Any] = {
        "tool_call_id": tool_call_id,
        "tool_name": "build_report",
        "arguments": "{}",
        "turn_id": "turn-1",
        "effect": ToolEffect.IDEMPOTENT_WRITE,
        "requires_approval": False,
        "status": ToolCallStatus.SUCCEEDED,
        "deferral_order": 0,
        "output": "ok",
    }
    fields.update(changes)
    return AgentToolCall(**fields)


def turn_context(**changes: Any) -> AgentTurnContext:
    heartbeats = Heartbeats()
    fields: dict[str, Any] = {
        "flow_id": "session-42",
        "turn_id": "turn-1",
        "attempt": 1,
        "messages": (
            AgentMessage(
                sequence=1, turn_id="turn-1", role=MessageRole.USER, framework_item="{}", text="Hi"
            ),
        ),
        "events": FakeEventWriter(),
        "heartbeat": heartbeats.heartbeat,
    }
    fields.update(changes)
    return AgentTurnContext(**fields)


def execution(
    tool_call: AgentToolCall, heartbeats: Heartbeats, **changes: Any
) -> DeferredToolExecution:
    fields: dict[str, Any] = {
        "flow_id": "session-42",
        "tool_call": tool_call,
        "idempotency_key": f"session-42/{tool_call.turn_id}/{tool_call.tool_call_id}",
        "attempt": 1,
        "events": FakeEventWriter(),
        "heartbeat": heartbeats.heartbeat,
        "save_heartbeat_checkpoint": heartbeats.save,
    }
    fields.update(changes)
    return DeferredToolExecution(**fields)
