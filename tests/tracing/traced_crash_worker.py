"""The Worker child of the tracing crash test: ``python -m tests.tracing.traced_crash_worker``.

It serves the session crash tests' agent (``tests.app.crash_agent``) with tracing
on by default through the global tracer provider, as an application that
configures the OpenTelemetry SDK would. With session setting
``{"heartbeat_first": true}`` the gated model call heartbeats before it stops at
its gate, so the engine counts the attempt as started and a kill fails it. Spans go through a ``SimpleSpanProcessor``
to ``$CRASH_STATE_DIR/spans-<pid>.jsonl``, one JSON object a line, written as
each span ends: what a SIGKILL leaves in the file is exactly what the process
exported before it died.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from dex_agents import AgentSessionFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.ports.runner import AgentTurnContext
from dex_agents.testing import run_agent_worker
from tests.app.crash_agent import (
    FLOW_TYPE,
    STATE_DIR_ENV,
    TOOL_POLICIES,
    CrashRunner,
    gated_tool,
)


def spans_file(state_dir: Path, pid: int) -> Path:
    """Where the Worker child with process ID ``pid`` writes its spans."""
    return state_dir / f"spans-{pid}.jsonl"


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
    trace.set_tracer_provider(provider)
    run_agent_worker([build_traced_crash_flow()])


if __name__ == "__main__":
    main()
