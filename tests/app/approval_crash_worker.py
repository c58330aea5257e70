"""The Worker child of the approval crash tests: ``python -m tests.app.approval_crash_worker``.

``AwaitToolApproval`` does no I/O of its own, so no tool or model gate stops it;
its one outward call is the activation's ``invoke_agent`` span, which it starts
once it read the approval and which is exported once its result is committed.
This Worker serves the session crash agent (``tests.app.crash_agent``) with
``refund``, a non-idempotent write that needs approval, and a span processor
that stops the whole Worker (its event loop) at gate ``<where>-<interrupt ID>``:

- ``approval-read``, when that span starts: the approval was read, nothing of
  the Step is committed;
- ``approval-committed``, when it ends: the Step's commit is in, the ``refund``
  Step it started has not run.

``refund`` records ``refund <idempotency key> attempt=<n>`` and answers at once.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from dex_agents import AgentSessionFlow
from dex_agents.adapters.local.probes import POLL_SECONDS, write_atomically
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.runner import DeferredToolExecution
from dex_agents.testing import FileGate, run_agent_worker
from tests.app.crash_agent import STATE_DIR_ENV, CrashRunner, invocation_log

FLOW_TYPE = "ApprovalCrashAgent"
TOOL_POLICIES = {"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)}
TRIGGER = "dex.agent.activation.trigger"
INTERRUPT_ID = "dex.agent.interrupt.id"


def approval_gate(state_dir: Path, where: str, interrupt_id: str) -> FileGate:
    """The gate ``approval-read`` or ``approval-committed`` of one approval."""
    return FileGate(state_dir, f"{where}-{interrupt_id}")


async def refund(call: DeferredToolExecution) -> str:
    """Record the write and answer ``refunded``."""
    log = invocation_log(Path(os.environ[STATE_DIR_ENV]))
    log.record(f"refund {call.idempotency_key} attempt={call.attempt}")
    return "refunded"


class ApprovalGatingProcessor(SpanProcessor):
    """Blocks the thread that starts or ends an approval's ``invoke_agent`` span at its gate.

    The Worker's event loop runs the Step and settles its commit, so it stops there
    with it: nothing the Worker does after that point happens before the test kills it.
    """

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._stop(span, "approval-read")

    def on_end(self, span: ReadableSpan) -> None:
        self._stop(span, "approval-committed")

    def _stop(self, span: ReadableSpan, where: str) -> None:
        attributes = span.attributes or {}
        if attributes.get(TRIGGER) != "interrupt_resolution":
            return
        gate = approval_gate(self._state_dir, where, str(attributes.get(INTERRUPT_ID)))
        write_atomically(gate.reached_path, str(os.getpid()))
        while not gate.released_path.exists():
            time.sleep(POLL_SECONDS)


def build_approval_crash_flow() -> AgentSessionFlow:
    """The test's session Flow, identical in the test process and the Worker child."""
    return AgentSessionFlow(
        CrashRunner(tools={"refund": refund}),
        flow_type=FLOW_TYPE,
        options=AgentSessionOptions(tool_policies=TOOL_POLICIES),
    )


def main() -> None:
    """Install the gating provider globally, then serve the agent."""
    provider = TracerProvider()
    provider.add_span_processor(ApprovalGatingProcessor(Path(os.environ[STATE_DIR_ENV])))
    trace.set_tracer_provider(provider)
    run_agent_worker([build_approval_crash_flow()])


if __name__ == "__main__":
    main()
