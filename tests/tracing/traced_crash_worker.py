"""The Worker child of the tracing crash test: ``python -m tests.tracing.traced_crash_worker``.

It serves the session crash tests' agent (``tests.app.crash_agent``) with tracing
on by default through the global tracer provider, as an application that
configures the OpenTelemetry SDK would. With session setting
``{"heartbeat_first": true}`` the gated model call heartbeats before it stops at
its gate, so the engine counts the attempt as started and a kill fails it. Spans go through a ``SimpleSpanProcessor``
to ``$CRASH_STATE_DIR/spans-<pid>.jsonl``, one JSON object a line, written as
each span ends: what a SIGKILL leaves in the file is exactly what the process
exported before it died. With ``$CRASH_SPAN_GATE`` set to a Step execution ID,
the Worker stops (its whole event loop) once that execution's span is exported,
at ``span_gate``, so a test kills it there.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from dex_agents import AgentSessionFlow
from dex_agents.adapters.local.probes import POLL_SECONDS, write_atomically
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.ports.runner import AgentTurnContext
from dex_agents.testing import FileGate, run_agent_worker
from tests.app.crash_agent import (
    FLOW_TYPE,
    STATE_DIR_ENV,
    TOOL_POLICIES,
    CrashRunner,
    gated_tool,
)

SPAN_GATE_ENV = "CRASH_SPAN_GATE"
"""The variable naming the Step execution whose exported span stops the Worker."""


def spans_file(state_dir: Path, pid: int) -> Path:
    """Where the Worker child with process ID ``pid`` writes its spans."""
    return state_dir / f"spans-{pid}.jsonl"


def span_gate(state_dir: Path, step_execution_id: str) -> FileGate:
    """The gate a Worker stops at once the span of ``step_execution_id`` is exported."""
    return FileGate(state_dir, f"span-{step_execution_id}")


class GatingSpanProcessor(SpanProcessor):
    """Blocks the thread that ends the span of one Step execution until its gate is released.

    Added after the exporting processor, so the span is in the file by then. The
    Worker's event loop stops with it: nothing the Worker does after that span
    ends (its Step's commit, when that comes later) happens before the test kills it.
    """

    def __init__(self, gate: FileGate, step_execution_id: str) -> None:
        self._gate = gate
        self._step_execution_id = step_execution_id

    def on_end(self, span: ReadableSpan) -> None:
        if (span.attributes or {}).get("dex.step.execution_id") != self._step_execution_id:
            return
        write_atomically(self._gate.reached_path, str(os.getpid()))
        while not self._gate.released_path.exists():
            time.sleep(POLL_SECONDS)


class JsonLinesSpanExporter(SpanExporter):
    """Appends each exported span as one line of ``ReadableSpan.to_json``."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        # Opened and closed per export, so every ended span is in the file (the OS keeps
        # written bytes when the process is killed).
        with self._path.open("a", encoding="utf-8") as file:
            for span in spans:
                file.write(span.to_json(indent=None) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class HeartbeatingCrashRunner(CrashRunner):
    """``CrashRunner`` whose resuming model call can heartbeat before it reaches its gate."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.is_resuming and turn.session_settings.get("heartbeat_first"):
            await turn.heartbeat()
        return await super().run_model_step(turn)


def build_traced_crash_flow() -> AgentSessionFlow:
    """The test's session Flow, identical in the test process and the Worker child."""
    return AgentSessionFlow(
        HeartbeatingCrashRunner(tools=dict.fromkeys(TOOL_POLICIES, gated_tool)),
        flow_type=FLOW_TYPE,
        options=AgentSessionOptions(tool_policies=TOOL_POLICIES),
    )


def main() -> None:
    """Install the file-exporting provider globally, then serve the crash agent."""
    provider = TracerProvider()
    path = spans_file(Path(os.environ[STATE_DIR_ENV]), os.getpid())
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
    gated = os.environ.get(SPAN_GATE_ENV)
    if gated:
        state_dir = Path(os.environ[STATE_DIR_ENV])
        provider.add_span_processor(GatingSpanProcessor(span_gate(state_dir, gated), gated))
    trace.set_tracer_provider(provider)
    run_agent_worker([build_traced_crash_flow()])


if __name__ == "__main__":
    main()
