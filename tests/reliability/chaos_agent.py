"""The agent of the random-kill scenario: every user message is a turn with four tool calls.

The model answers each message in three model calls: ``lookup`` (read) and
``upsert`` (idempotent write) at once, then ``charge`` (non-idempotent write)
and ``poke`` (unclassified), both with approval off so no person is needed,
then a text answer. Each tool takes a little time, so a kill lands mid-call
as often as between calls, and records in ``$CHAOS_STATE_DIR/invocations.log``:

- ``call <tool> <key> attempt=<n>`` when it starts;
- ``effect <tool> <key>`` when its side effect is done, just before it returns.

The model takes a little time too (a kill lands in it as well) and is
deterministic: the same request gives the same reply in any process.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from dex_agents import AgentSessionFlow, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    FunctionTool,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolCallContext,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.testing import InvocationLog

STATE_DIR_ENV = "CHAOS_STATE_DIR"
FLOW_TYPE = "ChaosAgent"
TOOL_WORK_SECONDS = 0.15
MODEL_WORK_SECONDS = 0.05
SINGLE_ATTEMPT_TOOLS = ("charge", "poke")


def invocation_log(state_dir: Path) -> InvocationLog:
    """The log of real tool calls and effects under a state directory."""
    return InvocationLog(state_dir / "invocations.log")


def _log() -> InvocationLog:
    # Read at call time: the test process builds the Flow too, without the variable.
    return invocation_log(Path(os.environ[STATE_DIR_ENV]))


def _tool(name: str, effect: ToolEffect) -> FunctionTool:
    async def run(message: str, context: ToolCallContext) -> str:
        _log().record(f"call {name} {context.idempotency_key} attempt={context.attempt}")
        await asyncio.sleep(TOOL_WORK_SECONDS)  # the tool's work, for a kill to land in
        _log().record(f"effect {name} {context.idempotency_key}")
        return f"{name} ok"

    run.__doc__ = f"The {effect.value} tool of the random-kill scenario."
    return function_tool(effect=effect, name=name, requires_approval=False)(run)


async def respond(request: ModelRequest) -> ScriptedModelReply:
    """lookup and upsert, then charge and poke, then the answer."""
    await asyncio.sleep(MODEL_WORK_SECONDS)
    message = ScriptedModelClient.user_texts(request)[-1]
    done = {result.tool_name for result in ScriptedModelClient.tool_results(request)}
    arguments = {"message": message}
    if not done:
        names: tuple[str, ...] = ("lookup", "upsert")
    elif "charge" not in done:
        names = SINGLE_ATTEMPT_TOOLS
    else:
        return ScriptedModelReply(text=f"done with {message}")
    return ScriptedModelReply(tool_calls=tuple(ScriptedToolCall(n, arguments) for n in names))


def build_chaos_flow() -> AgentSessionFlow:
    """The scenario's session Flow, identical in the test process and the Worker children."""
    agent = AgentDefinition(
        name="chaos",
        instructions="Look up, write, charge, answer.",
        model=ScriptedModelClient(respond),
        tools=[
            _tool("lookup", ToolEffect.READ),
            _tool("upsert", ToolEffect.IDEMPOTENT_WRITE),
            _tool("charge", ToolEffect.NON_IDEMPOTENT_WRITE),
            _tool("poke", ToolEffect.UNCLASSIFIED),
        ],
    )
    return builtin_agent_session_flow(agent, flow_type=FLOW_TYPE)
