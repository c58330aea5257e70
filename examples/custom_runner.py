"""A runner of your own: the runner contract instead of the built-in loop.

A framework adapter implements three methods, and the session calls them from
durable Steps: ``build_user_message`` (the user's text as a framework item),
``run_model_step`` (at most one model call; stop before any tool) and
``execute_deferred_tool_call`` (run one tool, in its own Step). This runner's
"model" echoes the user's text, except that ``shout <text>`` asks for the
``shout`` tool and answers with its result once the session has run it.
Nothing lives in the runner between calls: each call rebuilds what it needs
from its arguments, because a crash or a retry may call it again.

Run it with ``uv run python examples/custom_runner.py``. The session lives in
``custom-runner.sqlite3``; each run adds two turns to it.
"""

from __future__ import annotations

import asyncio
import json

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.local import LocalRuntime


class EchoRunner:
    """An ``AgentFrameworkRunner``: an echoing "model" and one tool, ``shout``."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        # framework_item is the framework's own replay data; text is what snapshots show.
        item = json.dumps({"type": "user", "text": text})
        return FrameworkMessage(role=MessageRole.USER, framework_item=item, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        usage = AgentUsage(model_calls=1)
        if turn.framework_run_state is not None:
            # The turn's second model call: the session ran the tool, and its record is
            # final. Nothing of this turn is stored yet, so return the tool request, its
            # result and the answer, in order; the session appends them in one commit.
            (record,) = turn.tool_calls.values()
            result = describe_tool_call_outcome(record)
            request = FrameworkMessage(
                role=MessageRole.ASSISTANT,
                framework_item=turn.framework_run_state,
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                tool_arguments=record.arguments,
            )
            tool_result = FrameworkMessage(
                role=MessageRole.TOOL,
                framework_item=json.dumps({"type": "tool_result", "output": result}),
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                tool_output=result,
            )
            return TurnCompleted([request, tool_result, _answer(result)], usage)
        text = next(m.text or "" for m in reversed(turn.messages) if m.role is MessageRole.USER)
        if not text.startswith("shout "):
            return TurnCompleted([_answer(f"echo: {text}")], usage)
        arguments = json.dumps({"text": text.removeprefix("shout ")})
        call = DeferredToolCall("call-1", "shout", arguments, turn.resolve_tool_policy("shout"))
        # The run state continues the turn after the tool: here, the model's tool request.
        run_state = json.dumps({"type": "tool_call", "id": "call-1", "arguments": arguments})
        return ToolCallsRequested(run_state, [call], usage)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        # Runs in its own Step (``CallTool``, as ``shout`` is a READ), on any worker.
        arguments = json.loads(call.tool_call.arguments)
        return ToolExecutionResult(arguments["text"].upper() + "!")


def _answer(text: str) -> FrameworkMessage:
    item = json.dumps({"type": "answer", "text": text})
    return FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=item, text=text)


flow = AgentSessionFlow(
    EchoRunner(),
    flow_type="EchoAgent",
    options=AgentSessionOptions(tool_policies={"shout": ToolPolicy(ToolEffect.READ)}),
)


async def main() -> None:
    async with LocalRuntime("custom-runner.sqlite3", [flow]) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("echo-1")
        for text in ("hello there", "shout durable steps"):
            await sessions.send_user_message("echo-1", text)
            snapshot = await sessions.wait_for_user("echo-1")
            print(f"you: {text}")
            answer = snapshot.messages[-1]
            stored = [str(m.role) for m in snapshot.messages if m.turn_id == answer.turn_id]
            print(f"agent: {answer.text}  ({answer.turn_id} stored {', '.join(stored)})")


if __name__ == "__main__":
    asyncio.run(main())
