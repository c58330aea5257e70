"""The README's tracing block runs as written and its provider exports a session's spans.

``opentelemetry-exporter-otlp`` is not a dependency of this repository, so its
module is the one thing stood in for: ``OTLPSpanExporter`` becomes a factory of
the SDK's ``InMemorySpanExporter`` that records the arguments the block passes.
Everything else (the ``TracerProvider``, the ``BatchSpanProcessor``, the
``AgentSessionOptions``) is the block's own code, run on a built-in loop
session on the embedded engine.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents.builtin_loop import (
    AgentDefinition,
    BuiltinLoopAgentRunner,
    ScriptedModelClient,
    ScriptedModelReply,
    builtin_agent_session_options,
)
from dex_agents.local import LocalRuntime
from tests.test_examples import section_blocks

EXPORTER_MODULE = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"


async def test_the_readme_tracing_block_exports_the_spans_of_a_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (block,) = section_blocks("Tracing", "python")
    exporters: list[tuple[dict[str, Any], InMemorySpanExporter]] = []

    def otlp_span_exporter(**arguments: Any) -> InMemorySpanExporter:
        exporter = InMemorySpanExporter()
        exporters.append((arguments, exporter))
        return exporter

    module = types.ModuleType(EXPORTER_MODULE)
    module.OTLPSpanExporter = otlp_span_exporter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, EXPORTER_MODULE, module)
    namespace: dict[str, Any] = {}
    exec(compile(block.text, "README.md", "exec"), namespace)

    options = namespace["options"]
    assert isinstance(options, AgentSessionOptions)
    ((arguments, exporter),) = exporters
    assert arguments == {"endpoint": "http://localhost:4317", "insecure": True}
    definition = AgentDefinition(
        name="triage",
        instructions="Answer briefly.",
        model=ScriptedModelClient(lambda request: ScriptedModelReply(text="On it.")),
    )
    flow = AgentSessionFlow(
        BuiltinLoopAgentRunner(definition),
        flow_type="TriageAgent",
        options=dataclasses.replace(
            builtin_agent_session_options(definition), tracing=options.tracing
        ),
    )
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s1")
        assert await sessions.send_user_message("s1", "my laptop will not start")
        await sessions.wait_for_user("s1")
    namespace["provider"].shutdown()  # the README's advice: flush the batch before exit
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["chat", "invoke_agent Triage"]
