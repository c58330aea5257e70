"""A fake of the ``ToolSource`` port, shared by the tool source and source router tests.

``FakeSource`` lists fixed tools and records what reaches it; each test configures the
tools, a failing or hanging listing and the poll interval it needs. ``DeclaringSource``
and ``RichSource`` add the optional members the runner and the router look for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any

from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.runner_outcomes import (
    DeferredToolCall,
    ToolExecutionResult,
    ToolTaskPending,
    ToolTaskPollOutcome,
)
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.tool_step_options import ToolCallStepOptions
from dex_agents.ports.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolTaskCancellation,
    ToolTaskPoll,
)
from tests.app.test_builtin_loop import RecordingWriter, no_heartbeat

READ_FILE = ListedTool(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    effect=ToolEffect.READ,
)


def read_tool(name: str) -> ListedTool:
    """A read tool named ``name``, for tests that give a source its tools by name."""
    return ListedTool(name=name, description=f"The {name} tool.", effect=ToolEffect.READ)


class FakeSource:
    """A tool source that lists fixed tools and answers every call with its name and arguments.

    ``tools`` may name a tool instead of giving it (a read tool of that name). A listing
    raises ``ConnectionError`` when ``fails`` and hangs for a minute when ``sleeps``; every
    poll answers ``ToolTaskPending(poll_interval_seconds)``. A built call takes the turn's
    policy for the listed tool's effect and the reference ``<source>-ref-<tool>``.
    """

    def __init__(
        self,
        name: str,
        tools: Sequence[ListedTool | str] = (READ_FILE,),
        *,
        fails: bool = False,
        sleeps: bool = False,
        poll_interval_seconds: float = 5,
    ) -> None:
        self._name = name
        self.tools = tuple(read_tool(t) if isinstance(t, str) else t for t in tools)
        self.fails = fails
        self.sleeps = sleeps
        self.poll_interval_seconds = poll_interval_seconds
        self.listings = 0
        self.built: list[tuple[str, ListedTool | None]] = []
        self.executed: list[tuple[str, str | None, str]] = []
        self.polled: list[str | None] = []

    @property
    def source_name(self) -> str:
        return self._name

    async def list_tools(self) -> Sequence[ListedTool]:
        self.listings += 1
        if self.fails:
            raise ConnectionError("server down")
        if self.sleeps:
            await asyncio.sleep(60)
        return self.tools

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        self.built.append((tool_name, listed_tool))
        effect = None if listed_tool is None else listed_tool.effect
        return DeferredToolCall(
            tool_call_id,
            tool_name,
            arguments,
            turn.resolve_tool_policy(tool_name, effect),
            tool_source_reference=f"{self._name}-ref-{tool_name}",
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        record = call.tool_call
        self.executed.append((record.tool_name, record.tool_source_reference, record.arguments))
        return ToolExecutionResult(f"{self._name} ran {record.tool_name} {record.arguments}")

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polled.append(poll.tool_call.tool_source_reference)
        return ToolTaskPending(poll_interval_seconds=self.poll_interval_seconds)


class DeclaringSource(FakeSource):
    """A source that declares the names every listing of it includes."""

    def declared_tool_names(self) -> Collection[str]:
        return [tool.name for tool in self.tools]


class RichSource(FakeSource):
    """A source that also gives tool Step options and cancels tasks."""

    def __init__(self, name: str, tools: Sequence[ListedTool | str] = (READ_FILE,)) -> None:
        super().__init__(name, tools)
        self.options_asked: list[str | None] = []
        self.cancelled: list[str | None] = []

    def tool_call_step_options(self, call: AgentToolCall) -> ToolCallStepOptions | None:
        self.options_asked.append(call.tool_source_reference)
        return ToolCallStepOptions(timeout=timedelta(seconds=42))

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled.append(cancellation.tool_call.tool_source_reference)


async def _no_checkpoint(text: str) -> None:
    return None


def _first_attempt(call: AgentToolCall) -> dict[str, Any]:
    return {
        "flow_id": "s1",
        "tool_call": call,
        "idempotency_key": f"s1/{call.turn_id}/{call.tool_call_id}",
        "attempt": 1,
        "events": RecordingWriter(),
        "heartbeat": no_heartbeat,
    }


def execution_of(call: AgentToolCall) -> DeferredToolExecution:
    """The first attempt of the deferred ``call`` of session ``s1``."""
    return DeferredToolExecution(**_first_attempt(call), save_heartbeat_checkpoint=_no_checkpoint)


def poll_of(call: AgentToolCall) -> ToolTaskPoll:
    """A first-attempt poll of the task of ``call`` in session ``s1``."""
    return ToolTaskPoll(**_first_attempt(call))
