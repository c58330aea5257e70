"""Fakes for the turn control RPC and Step tests: a staged transaction over plain values,
and the contexts a Step's wait and execute phases see."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dex_agents.adapters.local.rpcs import LocalRpcContext
from dex_agents.adapters.local.staged_state import StagedState
from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.session import SessionRuntime
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.plans import AgentPlan, PlanStatus
from dex_agents.domain.state import (
    AgentState,
    AgentStatus,
    TurnCancellationRequest,
    TurnControlKind,
    TurnControlRequest,
)
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports.engine import MapLoad, Rpc
from dex_agents.ports.flow_rows import MessageRow
from dex_agents.ports.persistence import AttributeDef, ChannelDef, StreamDef
from dex_agents.ports.session_schema import (
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
    agent_events_stream,
)
from dex_agents.ports.step_contexts import RecoveryError
from dex_agents.ports.step_waits import WaitResult
from tests.app.scripted_runner import ScriptedRunner

NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
ACTIVE = AgentState(status=AgentStatus.RUNNING_TOOLS, active_turn_id="turn-1", turn_count=1)
IDLE = AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=1)
LOCKED = AgentState(
    status=AgentStatus.RUNNING_MODEL, active_turn_id="turn-1", accepts_turn_control=False
)
QUEUED_ID = "QueuedUserMessages-0"
QUEUED = AgentUserMessage(text="queued")
"""The message ``QUEUED_ID`` names when a test queues only it."""


class FakeSource:
    """Committed values and waiting messages; ``vanishing`` messages are gone at the second look.

    ``taken`` messages are those a wait took whose Step has not committed: as on the
    embedded engine, an RPC lists them but neither counts nor deletes them.
    """

    def __init__(
        self,
        values: Mapping[tuple[str, str], str],
        channels: Mapping[str, Sequence[str]],
        vanishing: Sequence[str] = (),
        taken: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._values = dict(values)
        self._channels = {name: list(items) for name, items in channels.items()}
        self._vanishing = set(vanishing)
        self._taken = {name: list(items) for name, items in (taken or {}).items()}
        self._looks = 0

    def value(self, name: str, key: str) -> str | None:
        return self._values.get((name, key))

    def values(self, name: str) -> dict[str, str]:
        return {key: v for (n, key), v in self._values.items() if n == name and key}

    def channel_size(self, name: str) -> int:
        return len(self._channels.get(name, []))

    def _taken_rows(self, name: str) -> list[MessageRow]:
        # Taken before the waiting messages arrived, so they come first.
        return [
            MessageRow(-1 - i, "s1", name, "", f"{name}-taken-{i}", value, NOW)
            for i, value in reversed(list(enumerate(self._taken.get(name, []))))
        ]

    def _waiting_rows(self, name: str) -> list[MessageRow]:
        self._looks += 1
        rows = [
            MessageRow(i, "s1", name, "", f"{name}-{i}", value, NOW)
            for i, value in enumerate(self._channels.get(name, []))
        ]
        if self._looks > 1:
            rows = [row for row in rows if row.message_id not in self._vanishing]
        return rows

    def pending(self, name: str) -> Sequence[MessageRow]:
        return [*self._taken_rows(name), *self._waiting_rows(name)]

    def deletable(self, name: str) -> Sequence[MessageRow]:
        # A vanishing message is gone by the second look.
        return self._waiting_rows(name)


def staged(
    agent_state: AgentState | None,
    *,
    values: Mapping[AttributeDef[Any], Any] | None = None,
    records: Sequence[AgentToolCall] = (),
    channels: Mapping[ChannelDef[Any], Sequence[Any]] | None = None,
    vanishing: Sequence[str] = (),
    taken: Mapping[ChannelDef[Any], Sequence[Any]] | None = None,
) -> StagedState:
    stored = {(attribute.name, ""): to_json(value) for attribute, value in (values or {}).items()}
    if agent_state is not None:
        stored[(AGENT_STATE.name, "")] = to_json(agent_state)
    for record in records:
        stored[(AGENT_TOOL_CALLS.name, record.tool_call_id)] = to_json(record)
    waiting = {c.name: [to_json(v) for v in items] for c, items in (channels or {}).items()}
    took = {c.name: [to_json(v) for v in items] for c, items in (taken or {}).items()}
    source = FakeSource(stored, waiting, vanishing, took)
    return StagedState("s1", source, (MapLoad(AGENT_TOOL_CALLS),))


def runtime(runner: ScriptedRunner | None = None, **options: Any) -> SessionRuntime:
    return SessionRuntime(
        runner or ScriptedRunner(), AgentSessionOptions(**options), agent_events_stream(), "T"
    )


def call(rpc: Rpc[Any, Any], state: StagedState, request: object) -> Any:
    return rpc.handler(LocalRpcContext("s1", NOW, True, state), request)


def published(state: StagedState) -> list[tuple[str, str, str]]:
    return [(p.channel, p.key, p.value) for p in state.publishes]


def record(tool_call_id: str, status: ToolCallStatus, **fields: Any) -> AgentToolCall:
    defaults: dict[str, Any] = {
        "tool_name": "refund",
        "arguments": "{}",
        "turn_id": "turn-1",
        "effect": "unclassified",
        "requires_approval": False,
        "deferral_order": 0,
    }
    return AgentToolCall(tool_call_id=tool_call_id, status=status, **(defaults | fields))


def written_record(state: StagedState, tool_call_id: str) -> AgentToolCall:
    text = state.writes[(AGENT_TOOL_CALLS.name, tool_call_id)]
    assert text is not None
    return from_json(text, AgentToolCall)


DRAFT = AgentPlan(revision=3, status=PlanStatus.DRAFT)
WAITING_INTERRUPT = AgentInterrupt(
    interrupt_id="a", tool_call_id="a", tool_name="refund", kind="approval", turn_id="turn-1"
)


@dataclass
class FakeStepContext:
    """A Step execute phase's context over a staged state; live events are kept in ``events``."""

    state: StagedState
    attempt: int = 1
    now: datetime = NOW
    wait_result: WaitResult = field(default_factory=WaitResult)
    flow_id: str = "s1"
    step_type: str = "Test"
    step_execution_id: str = "Test-1"
    first_attempt_at: datetime = NOW
    recovery_error: RecoveryError | None = None
    last_heartbeat_value: str | None = None
    events: list[AgentEvent] = field(default_factory=list)
    heartbeats: list[tuple[str | None, bool]] = field(default_factory=list)

    async def heartbeat(self, checkpoint: str | None = None, *, durable: bool = True) -> None:
        self.heartbeats.append((checkpoint, durable))

    def write_event(self, stream: StreamDef[Any], value: Any) -> None:
        self.events.append(value)

    def is_cancellation_requested(self) -> bool:
        return False


STEER_TEXT = AgentUserMessage(text="s")
STEERED = {STEERED_USER_MESSAGES: [STEER_TEXT]}
WAKE = TurnControlRequest(kind=TurnControlKind.STEER, turn_id="turn-1")
WAKES, STEERS = TURN_CONTROL_REQUESTS.name, STEERED_USER_MESSAGES.name
WOKEN: dict[ChannelDef[Any], list[Any]] = {STEERED_USER_MESSAGES: [STEER_TEXT]}
CANCELLED = {TURN_CANCELLATION_REQUEST: TurnCancellationRequest(turn_id="turn-1")}


@dataclass
class FakeWaitContext:
    state: StagedState
    flow_id: str = "s1"
    step_execution_id: str = "Test-1"
    now: datetime = NOW
