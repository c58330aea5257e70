"""The agent of the spec's "Testing an adapter" example: one refund tool that needs approval.

The test process and the Worker child (``tests.my_worker``) both call
``build_flow()``: the test process for its client, the child to run the Steps.
The ``refund`` tool is a ``non_idempotent_write`` (approval by default) that
records each real run in an ``InvocationLog`` under ``$MY_STATE_DIR``, so a test
counts runs across Worker processes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from dex_agents import AgentSessionFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, DeferredToolCall, ToolCallsRequested
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.testing import InvocationLog
from tests.app.scripted_runner import ScriptedRunner

STATE_DIR_ENV = "MY_STATE_DIR"
FLOW_TYPE = "MyAgent"
_REFUND_REQUEST = re.compile(r"refund order (\d+)")


def invocation_log(state_dir: Path) -> InvocationLog:
    """The log of real tool runs under a state directory."""
    return InvocationLog(state_dir / "invocations.log")


async def refund(call: DeferredToolExecution) -> str:
    """Refund an order; it runs in the Worker child, where ``$MY_STATE_DIR`` is set."""
    invocation_log(Path(os.environ[STATE_DIR_ENV])).record("refund")
    order = json.loads(call.tool_call.arguments)["order"]
    return f"refunded order {order}"


class RefundRunner(ScriptedRunner):
    """A scripted model that answers ``refund order <n>`` with one ``refund`` call."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        text = next(
            (m.text or "" for m in reversed(turn.messages) if m.role is MessageRole.USER), ""
        )
        request = _REFUND_REQUEST.fullmatch(text)
        if request is None or turn.is_resuming:
            return await super().run_model_step(turn)
        self.model_calls.append(turn)
        return ToolCallsRequested(
            framework_run_state=json.dumps({"turn": turn.turn_id}),
            tool_calls=[
                DeferredToolCall(
                    "call-1",
                    "refund",
                    json.dumps({"order": int(request[1])}),
                    turn.resolve_tool_policy("refund"),
                )
            ],
            usage=AgentUsage(model_calls=1, input_tokens=10, output_tokens=5),
        )


def build_flow() -> AgentSessionFlow:
    """The agent's session Flow, identical in the test process and the Worker child."""
    return AgentSessionFlow(
        RefundRunner(tools={"refund": refund}),
        flow_type=FLOW_TYPE,
        options=AgentSessionOptions(
            tool_policies={"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}
        ),
    )
