"""The agent of the SIGKILL matrix: one tool per effect class, gates at every kill point.

A session ``<point>-<tool>`` is sent the message ``"<point> <tool>"``. Its
model asks for ``<tool>`` once, then answers ``"<session>: <tool output>"``.
The four tools (``lookup`` read, ``upsert`` idempotent write, ``pay``
non-idempotent write and ``poke`` unclassified, both with approval) record in
``$MATRIX_STATE_DIR/invocations.log``:

- ``model <session> request|answer``: each real model call;
- ``call <session> <key> attempt=<n>``: the tool's first line ran;
- ``effect <session> <key>``: the tool's side effect happened.

Attempt 1 of a call, and each model call, stops at the ``FileGate`` of the
session's kill point, so a test SIGKILLs the Worker exactly there:

- ``before``: in the model call that asks for the tool (``<session>-model-request``);
- ``mid``: at the tool's first line, before its effect (``<session>-tool-mid``);
- ``after``: after the effect, before the tool returns (``<session>-tool-after``);
- ``model``: in the model call that reads the result (``<session>-model-answer``).
"""

from __future__ import annotations

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
from dex_agents.testing import FileGate, InvocationLog

STATE_DIR_ENV = "MATRIX_STATE_DIR"
FLOW_TYPE = "KillMatrixAgent"
KILL_POINTS = ("before", "mid", "after", "model")
TOOL_EFFECTS = {
    "lookup": ToolEffect.READ,
    "upsert": ToolEffect.IDEMPOTENT_WRITE,
    "pay": ToolEffect.NON_IDEMPOTENT_WRITE,
    "poke": ToolEffect.UNCLASSIFIED,
}
RETRYABLE = frozenset({ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE})


def session_id(point: str, tool: str) -> str:
    return f"{point}-{tool}"


def invocation_log(state_dir: Path) -> InvocationLog:
    """The log of real model calls, tool calls and effects under a state directory."""
    return InvocationLog(state_dir / "invocations.log")


def gate(state_dir: Path, session: str, where: str) -> FileGate:
    """The gate of ``session`` at ``where`` (``model-request``, ``tool-mid``, ...)."""
    return FileGate(state_dir, f"{session}-{where}")


def kill_gate(state_dir: Path, point: str, tool: str) -> FileGate:
    """The gate session ``<point>-<tool>`` stops at, where the test kills its Worker."""
    where = {
        "before": "model-request",
        "mid": "tool-mid",
        "after": "tool-after",
        "model": "model-answer",
    }[point]
    return gate(state_dir, session_id(point, tool), where)


def _state_dir() -> Path:
    # Read at call time: the test process builds the Flow too, without the variable.
    return Path(os.environ[STATE_DIR_ENV])


async def _run_tool(tool: str, session: str, context: ToolCallContext) -> str:
    state_dir = _state_dir()
    log = invocation_log(state_dir)
    point = session.split("-", 1)[0]
    first = context.attempt == 1
    log.record(f"call {session} {context.idempotency_key} attempt={context.attempt}")
    if point == "mid" and first:
        await gate(state_dir, session, "tool-mid").wait_for_release()
    log.record(f"effect {session} {context.idempotency_key}")
    if point == "after" and first:
        await gate(state_dir, session, "tool-after").wait_for_release()
    return f"{tool} ok"


def _tool(name: str, effect: ToolEffect) -> FunctionTool:
    async def run(session: str, context: ToolCallContext) -> str:
        return await _run_tool(name, session, context)

    run.__doc__ = f"The {effect.value} tool of the kill matrix."
    return function_tool(effect=effect, name=name)(run)


async def respond(request: ModelRequest) -> ScriptedModelReply:
    """Ask for the message's tool, or answer with its result; gate where the session says."""
    point, tool = ScriptedModelClient.user_texts(request)[-1].split()
    session = session_id(point, tool)
    results = ScriptedModelClient.tool_results(request)
    phase = "answer" if results else "request"
    invocation_log(_state_dir()).record(f"model {session} {phase}")
    if (point, phase) in (("before", "request"), ("model", "answer")):
        await gate(_state_dir(), session, f"model-{phase}").wait_for_release()
    if results:
        return ScriptedModelReply(text=f"{session}: {results[-1].output}")
    return ScriptedModelReply(tool_calls=(ScriptedToolCall(tool, {"session": session}),))


def build_matrix_flow() -> AgentSessionFlow:
    """The matrix's session Flow, identical in the test process and the Worker child."""
    agent = AgentDefinition(
        name="kill-matrix",
        instructions="Call the tool you are told to, then report its result.",
        model=ScriptedModelClient(respond),
        tools=[_tool(name, effect) for name, effect in TOOL_EFFECTS.items()],
    )
    return builtin_agent_session_flow(agent, flow_type=FLOW_TYPE)
