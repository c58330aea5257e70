"""The agent of the session crash tests: gated tools and a gated model, run by Worker children.

Every real call is recorded in ``$CRASH_STATE_DIR/invocations.log`` and then
stops at a ``FileGate`` in ``$CRASH_STATE_DIR``, so a test SIGKILLs the Worker
child at an exact point and sees what really ran, in which process, how often:

- tool ``<name>`` (``lookup`` read, ``upsert`` idempotent write, ``pay``
  non-idempotent write with approval off) records ``<name> <idempotency key>
  attempt=<n>`` and waits at gate ``<name>-<tool call ID>-attempt-<n>``;
- the model records ``model <turn> first|resume``; with session setting
  ``{"gate_model": true}`` its resuming call waits at gate ``model-<turn>``.

The model itself is ``ScriptedRunner``'s (``call lookup {} and pay {}`` ...).
"""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents import AgentSessionFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.testing import FileGate, InvocationLog
from tests.app.scripted_runner import ScriptedRunner

STATE_DIR_ENV = "CRASH_STATE_DIR"
FLOW_TYPE = "CrashAgent"
TOOL_POLICIES = {
    "lookup": ToolPolicy(ToolEffect.READ),
    "upsert": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
    "pay": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
}


def invocation_log(state_dir: Path) -> InvocationLog:
    """The log of real tool and model calls under a state directory."""
    return InvocationLog(state_dir / "invocations.log")


def tool_gate(state_dir: Path, tool_name: str, tool_call_id: str, attempt: int) -> FileGate:
    """The gate one attempt of one tool call stops at."""
    return FileGate(state_dir, f"{tool_name}-{tool_call_id}-attempt-{attempt}")


def model_gate(state_dir: Path, turn_id: str) -> FileGate:
    """The gate a turn's resuming model call stops at when the session asks for it."""
    return FileGate(state_dir, f"model-{turn_id}")


def _state_dir() -> Path:
    # Read at call time: the test process builds the Flow too, without the variable.
    return Path(os.environ[STATE_DIR_ENV])


async def gated_tool(call: DeferredToolExecution) -> str:
    """Record the call, wait at its gate, and answer ``<name> done``."""
    name = call.tool_call.tool_name
    invocation_log(_state_dir()).record(f"{name} {call.idempotency_key} attempt={call.attempt}")
    await tool_gate(
        _state_dir(), name, call.tool_call.tool_call_id, call.attempt
    ).wait_for_release()
    return f"{name} done"


class CrashRunner(ScriptedRunner):
    """``ScriptedRunner`` that records model calls and can hold the resuming one at a gate."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        phase = "resume" if turn.is_resuming else "first"
        invocation_log(_state_dir()).record(f"model {turn.turn_id} {phase}")
        if turn.is_resuming and turn.session_settings.get("gate_model"):
            await model_gate(_state_dir(), turn.turn_id).wait_for_release()
        return await super().run_model_step(turn)


def build_crash_flow() -> AgentSessionFlow:
    """The crash tests' session Flow, identical in the test process and the Worker child."""
    return AgentSessionFlow(
        CrashRunner(tools=dict.fromkeys(TOOL_POLICIES, gated_tool)),
        flow_type=FLOW_TYPE,
        options=AgentSessionOptions(tool_policies=TOOL_POLICIES),
    )
