"""A scripted runner for session tests: the runner contract with no model and no framework.

Its model reads the turn's last user text: ``call <tool> <json arguments>`` asks
for one tool call (``call a {} and b {}`` for several), ``fail`` raises, anything
else is answered as ``echo: <text>``. After tool calls it answers with the
results it was given. Tools are plain async functions by name.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    DeferredToolCall,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.domain.tool_outcomes import describe_tool_call_outcome
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution

Tool = Callable[[DeferredToolExecution], Awaitable[str]]


@dataclass
class ScriptedRunner:
    """A deterministic runner; ``model_failures`` makes the next model calls raise."""

    tools: Mapping[str, Tool] = field(default_factory=dict)
    model_failures: int = 0
    model_calls: list[AgentTurnContext] = field(default_factory=list)
    tool_calls: list[DeferredToolExecution] = field(default_factory=list)

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(
            role=MessageRole.USER,
            framework_item=json.dumps({"type": "user", "text": text}),
            text=text,
        )

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        self.model_calls.append(turn)
        if self.model_failures > 0:
            self.model_failures -= 1
            raise RuntimeError("the scripted model is down")
        usage = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5)
        if turn.is_resuming:
            results = [
                f"{record.tool_name}={describe_tool_call_outcome(record)}"
                for record in sorted(turn.tool_calls.values(), key=lambda r: r.deferral_order)
            ]
            return TurnCompleted(new_messages=[self._answer("; ".join(results))], usage=usage)
        text = next(
            (m.text or "" for m in reversed(turn.messages) if m.role is MessageRole.USER), ""
        )
        if text == "fail":
            raise RuntimeError("the scripted model cannot answer 'fail'")
        calls = (
            [tuple(part.split(" ", 1)) for part in text[len("call ") :].split(" and ")]
            if text.startswith("call ")
            else []
        )
        if calls:
            return ToolCallsRequested(
                framework_run_state=json.dumps({"turn": turn.turn_id}),
                tool_calls=[
                    DeferredToolCall(
                        f"call-{index}", name, arguments, turn.resolve_tool_policy(name)
                    )
                    for index, (name, arguments) in enumerate(calls, start=1)
                ],
                usage=usage,
            )
        return TurnCompleted(new_messages=[self._answer(f"echo: {text}")], usage=usage)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self.tool_calls.append(call)
        tool = self.tools[call.tool_call.tool_name]
        return ToolExecutionResult(await tool(call))

    @staticmethod
    def _answer(text: str) -> FrameworkMessage:
        return FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=json.dumps({"type": "assistant", "text": text}),
            text=text,
        )


def tool_names(calls: Sequence[DeferredToolExecution]) -> list[str]:
    """The names of the tools a runner ran, in order."""
    return [call.tool_call.tool_name for call in calls]
