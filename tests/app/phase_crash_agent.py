"""The agent of the phase crash tests: compaction, retention and RPCs racing a killed call.

The crash agent (``tests.app.crash_agent``) stops inside tool and model calls;
this one adds the phases it does not reach. Its runner compacts (as
``CompactingRunner`` does, at ``POLICY``'s small window over ``SMALL_STORAGE``'s
small window, chunks and retention limit) and records every real call in
``$PHASE_CRASH_STATE_DIR/invocations.log``:

- ``model <turn> first|resume settings=<json>``: each model call, with the
  settings the turn runs with;
- ``summary <turn> through=<n>``: each summary call of ``CompactContext``;
- ``pay <idempotency key> attempt=<n>``: the non-idempotent write (no approval),
  which then waits at gate ``pay-<tool call ID>``.

It offers the built-in ``ask_user``, ``durable_wait`` and ``write_todos`` too, and
plan mode.

A turn whose settings hold ``"gates": [...]`` stops its model calls
(``"model"``), only its resuming ones (``"resume"``), and its summary calls
(``"summary"``) at gate ``<what>-<turn>``, so a test SIGKILLs the Worker there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionFlow, BuiltInTool, CompactionPolicy
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, ContextSummaryResult
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.testing import FileGate, InvocationLog
from tests.app.compaction_support import SUMMARY_USAGE, CompactingRunner

STATE_DIR_ENV = "PHASE_CRASH_STATE_DIR"
FLOW_TYPE = "PhaseCrashAgent"
POLICY = CompactionPolicy(context_window_tokens=100)
SMALL_STORAGE: dict[str, Any] = {
    "message_window_size": 4,
    "message_chunk_size": 2,
    "retained_message_limit": 6,
}
TOOL_POLICIES = {"pay": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)}


def invocation_log(state_dir: Path) -> InvocationLog:
    """The log of real model, summary and tool calls under a state directory."""
    return InvocationLog(state_dir / "invocations.log")


def gate(state_dir: Path, what: str, turn_or_call: str) -> FileGate:
    """The gate ``<what>-<turn or tool call ID>`` (``model``, ``resume``, ``summary`` or ``pay``)."""
    return FileGate(state_dir, f"{what}-{turn_or_call}")


def _state_dir() -> Path:
    # Read at call time: the test process builds the Flow too, without the variable.
    return Path(os.environ[STATE_DIR_ENV])


def _gated(settings: Any, what: str) -> bool:
    gates = settings.get("gates") if isinstance(settings, dict) else None
    return isinstance(gates, list) and what in gates


async def pay(call: DeferredToolExecution) -> str:
    """Record the write, wait at its gate, and answer ``paid``."""
    invocation_log(_state_dir()).record(f"pay {call.idempotency_key} attempt={call.attempt}")
    await gate(_state_dir(), "pay", call.tool_call.tool_call_id).wait_for_release()
    return "paid"


class PhaseCrashRunner(CompactingRunner):
    """``CompactingRunner`` that records its calls and stops them at gates a turn asks for."""

    @property
    def supports_plan_mode(self) -> bool:
        return True

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        phase = "resume" if turn.is_resuming else "first"
        settings = json.dumps(dict(turn.session_settings), sort_keys=True)
        invocation_log(_state_dir()).record(f"model {turn.turn_id} {phase} settings={settings}")
        if _gated(dict(turn.session_settings), "model"):
            await gate(_state_dir(), "model", turn.turn_id).wait_for_release()
        if turn.is_resuming and _gated(dict(turn.session_settings), "resume"):
            await gate(_state_dir(), "resume", turn.turn_id).wait_for_release()
        return await super().run_model_step(turn)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        log = invocation_log(_state_dir())
        log.record(f"summary {request.turn_id} through={request.through_sequence}")
        if _gated(request.session_settings, "summary"):
            await gate(_state_dir(), "summary", request.turn_id).wait_for_release()
        return ContextSummaryResult(
            text=f"summary through {request.through_sequence}", usage=SUMMARY_USAGE
        )


def build_phase_crash_flow() -> AgentSessionFlow:
    """The phase crash tests' session Flow, identical in the test process and the Worker child."""
    options = AgentSessionOptions(
        tool_policies=TOOL_POLICIES,
        built_in_tools=frozenset(
            {BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT, BuiltInTool.WRITE_TODOS}
        ),
        plan_mode_enabled=True,
        compaction=POLICY,
        **SMALL_STORAGE,
    )
    return AgentSessionFlow(
        PhaseCrashRunner(tools={"pay": pay}), flow_type=FLOW_TYPE, options=options
    )
