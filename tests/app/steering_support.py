"""Helpers of the steering tests: runners that hold a model call, and transcript helpers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    ToolTaskPending,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.tool_outcomes import (
    describe_tool_call_outcome,
)
from dex_agents.ports.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolTaskCancellation,
    ToolTaskPoll,
)
from tests.app.scripted_runner import ScriptedRunner


@dataclass
class SlowModelRunner(ScriptedRunner):
    """A model that answers ``slow_text`` only once ``release`` is set; it notes a cancellation."""

    slow_text: str = "slow"
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        last = next((m.text for m in reversed(turn.messages) if m.role is MessageRole.USER), "")
        if last == self.slow_text and not turn.is_resuming and not self.entered.is_set():
            self.entered.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return await super().run_model_step(turn)


@dataclass
class TranscriptRunner(ScriptedRunner):
    """Stores a steered turn's tool results itself, as a runner that stores items as they appear."""

    unfinished: list[dict[str, AgentToolCall]] = field(default_factory=list)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        self.unfinished.append(dict(turn.tool_calls))
        return [
            FrameworkMessage(
                role=MessageRole.TOOL,
                framework_item=json.dumps({"type": "tool", "id": record.tool_call_id}),
                text=f"{record.tool_name}={describe_tool_call_outcome(record)}",
            )
            for record in sorted(turn.tool_calls.values(), key=lambda r: r.deferral_order)
        ]


def texts(messages: Sequence[object]) -> list[tuple[str, str | None]]:
    return [(m.role.value, m.text) for m in messages]  # type: ignore[attr-defined]


@dataclass
class CancellableTaskRunner(TranscriptRunner):
    """Every tool starts task ``task-7`` once ``release`` is set; each poll says it still runs."""

    interval: float = 3600
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    polls: list[ToolTaskPoll] = field(default_factory=list)
    cancelled_tasks: list[ToolTaskCancellation] = field(default_factory=list)

    async def execute_deferred_tool_call(  # type: ignore[override]
        self, call: DeferredToolExecution
    ) -> ToolTaskStarted:
        self.tool_calls.append(call)
        self.started.set()
        await self.release.wait()
        return ToolTaskStarted(task_id="task-7", poll_interval_seconds=self.interval)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polls.append(poll)
        return ToolTaskPending(poll_interval_seconds=3600)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled_tasks.append(cancellation)

    def assert_task_abandoned(self) -> None:
        """``task-7`` was cancelled once, and the cancelled turn recorded ``call-1`` outcome unknown."""
        assert [c.tool_call.task_id for c in self.cancelled_tasks] == ["task-7"]
        (records,) = self.unfinished
        abandoned = records["call-1"]
        assert (abandoned.status, abandoned.cancellation_reason) == (
            ToolCallStatus.OUTCOME_UNKNOWN,
            CancellationReason.TURN_CANCELLED,
        )
