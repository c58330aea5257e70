"""The engine contract's Flow and runner: the scripted model plus every optional runner protocol.

``ContractRunner`` answers like ``ScriptedRunner`` (``call <tool> <json> and ...``,
``fail``, otherwise an echo) and adds what the session Flow needs to reach each of
its Steps: tools that start tasks (``PollToolTask``), tasks that ask a question,
fail their polls or refuse to be cancelled (``CancelToolTask`` and its failure
route), tools that fail (``RecordToolFailure``, ``RecordToolOutcomeUnknown``), a
tool that succeeds on its second attempt from its checkpoint, ordered writes,
compaction (``CompactContext``) and plan mode.

Every answer derives from the call's arguments only, never from a counter, so
the runner of the Dex replay (another instance) answers each replayed
execution exactly as the recorded one was answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs

from dex_agents import AgentSessionFlow, AgentSessionOptions, RunModelLimit
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    ContextSummaryResult,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_step_options import ToolCallRetryPolicy, ToolCallStepOptions
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolTaskCancellation,
    ToolTaskPoll,
)
from tests.app.scripted_runner import ScriptedRunner

FLOW_TYPE = "ContractAgent"
SESSION = "s1"

READ = ToolPolicy(ToolEffect.READ)
SILENT_WRITE = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=False)
SILENT_PAYMENT = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)

TOOL_POLICIES = {
    "lookup": READ,
    "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),  # waits for approval
    "flaky": READ,
    "publish": READ,
    "broken_read": READ,
    "broken_sync": SILENT_WRITE,
    "broken_charge": SILENT_PAYMENT,
    "doomed_read_task": READ,
    "doomed_pay_task": SILENT_PAYMENT,
    "ship": SILENT_WRITE,
    "broken_ship": SILENT_WRITE,
    "stuck_task": READ,
    "stubborn_task": READ,
    "misconfigured_refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),  # waits for approval
}
"""Each tool's effect; the runner's own sets below say how it behaves."""

TASK_TOOLS = frozenset(
    {"publish", "doomed_read_task", "doomed_pay_task", "stuck_task", "stubborn_task"}
)
"""Tools that start a task instead of answering."""

BROKEN_TOOLS = frozenset({"broken_read", "broken_sync", "broken_charge", "broken_ship"})
"""Tools whose every attempt raises; each gets one attempt, so its failure route runs at once."""

ORDERED_TOOLS = frozenset({"ship", "broken_ship"})
"""Writes marked ``ordered``: one response's run one at a time."""

MISCONFIGURED_TOOLS = frozenset({"misconfigured_refund"})
"""Tools whose step options raise, so ``AwaitToolApproval`` fails once they are approved."""

FLAKY_RETRY_INTERVAL = timedelta(milliseconds=500)
"""``flaky``'s own retry interval, as a connector's retry policy may give it: not whole seconds."""

LONG_POLL_SECONDS = 3600
"""The poll interval of the tasks that ``cancel_turn`` abandons before their first poll."""

SUMMARY_DOWN = {"summary": "down"}
"""Session settings under which ``summarize_context`` raises."""


class ContractRunner:
    """``ScriptedRunner``'s model and tools, with tool tasks, compaction, plan mode and step options."""

    def __init__(self) -> None:
        self._scripted = ScriptedRunner({"lookup": _found, "refund": _refunded, "ship": _shipped})

    # -- AgentFrameworkRunner ----------------------------------------------

    def build_user_message(self, text: str) -> FrameworkMessage:
        return self._scripted.build_user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await self._scripted.run_model_step(turn)
        if not isinstance(outcome, ToolCallsRequested):
            return outcome
        calls = [
            attrs.evolve(call, ordered=call.tool_name in ORDERED_TOOLS)
            for call in outcome.tool_calls
        ]
        return attrs.evolve(outcome, tool_calls=tuple(calls))

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        name = call.tool_call.tool_name
        if name in BROKEN_TOOLS:
            raise RuntimeError(f"{name} is broken")
        if name in TASK_TOOLS:
            interval = LONG_POLL_SECONDS if name in {"stuck_task", "stubborn_task"} else 1
            return ToolTaskStarted(f"task-{name}", poll_interval_seconds=interval)
        if name == "flaky":
            if call.attempt == 1:
                await call.save_heartbeat_checkpoint("cursor=7")
                raise RuntimeError("flaky lost its connection")
            return ToolExecutionResult(f"flaky resumed from {call.heartbeat_checkpoint}")
        return await self._scripted.execute_deferred_tool_call(call)

    # -- ToolCallStepOptionsProvider ---------------------------------------

    def tool_call_step_options(self, call: AgentToolCall) -> ToolCallStepOptions | None:
        if call.tool_name in MISCONFIGURED_TOOLS:
            raise RuntimeError(f"{call.tool_name} has no step options")
        if call.tool_name in BROKEN_TOOLS:
            return ToolCallStepOptions(retry_policy=ToolCallRetryPolicy(maximum_attempts=1))
        if call.tool_name == "flaky":
            retry = ToolCallRetryPolicy(maximum_attempts=2, initial_interval=FLAKY_RETRY_INTERVAL)
            return ToolCallStepOptions(timeout=timedelta(minutes=5), retry_policy=retry)
        return None

    # -- ToolTaskPoller and ToolTaskCanceller --------------------------------

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        record = poll.tool_call
        if record.tool_name.startswith("doomed_"):
            raise RuntimeError("the task service is down")
        if record.tool_name != "publish":
            return ToolTaskPending(poll_interval_seconds=LONG_POLL_SECONDS)
        # publish asks once, takes the answer on the next poll, and is done on the one after.
        if record.input_request_count == 0:
            return ToolInputRequested(
                "Publish the draft?", choices=("yes", "no"), continuation="asked"
            )
        if poll.pending_answer is not None:
            return ToolTaskPending(poll_interval_seconds=1, continuation="answered")
        return ToolExecutionResult(f"published after {list(record.input_answers)}")

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        if cancellation.tool_call.tool_name == "stubborn_task":
            raise RuntimeError("the task cannot be stopped")

    # -- ContextCompactionRunner ---------------------------------------------

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        # Only a turn that says "compact" is over the window.
        return 10**6 if _last_user_text(turn.messages).startswith("compact") else 0

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        earlier = [m.sequence for m in turn.messages if m.turn_id != turn.turn_id]
        return max(earlier, default=None)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        if request.session_settings.get("summary") == SUMMARY_DOWN["summary"]:
            raise RuntimeError("the summary model is down")
        return ContextSummaryResult(
            text=f"summary of {len(request.messages)} messages through {request.through_sequence}",
            usage=AgentUsage(model_calls=1, input_tokens=70, output_tokens=30),
        )

    # -- PlanModeRunner ------------------------------------------------------

    @property
    def supports_plan_mode(self) -> bool:
        return True


async def _found(call: DeferredToolExecution) -> str:
    return f"found {call.tool_call.arguments}"


async def _refunded(call: DeferredToolExecution) -> str:
    return f"refunded {call.tool_call.arguments}"


async def _shipped(call: DeferredToolExecution) -> str:
    return f"shipped {call.tool_call.arguments}"


def _last_user_text(messages: Sequence[Any]) -> str:
    return next((m.text or "" for m in reversed(messages) if m.role is MessageRole.USER), "")


def contract_flow(flow_class: type[AgentSessionFlow] = AgentSessionFlow) -> AgentSessionFlow:
    """The session Flow both engines run: every built-in tool, plan mode and compaction on."""
    options = AgentSessionOptions(
        tool_policies=TOOL_POLICIES,
        built_in_tools=frozenset(BuiltInTool),
        plan_mode_enabled=True,
        compaction=CompactionPolicy(context_window_tokens=1000),
        # One attempt, so a failing model or summary call takes the failure route at once.
        run_model_limit=RunModelLimit(maximum_attempts=1),
    )
    return flow_class(ContractRunner(), flow_type=FLOW_TYPE, options=options)
