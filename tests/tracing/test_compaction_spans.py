"""``CompactContext`` attempts emit ``chat`` spans under the activation's root."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dex_agents import AgentSessionFlow, AgentTracingOptions, CompactionPolicy
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.local import LocalRuntime
from tests.app.test_builtin_loop_compaction import PADDING, SUMMARY_TEXT, agent


async def test_a_compaction_is_a_chat_span_of_its_activation() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    definition = agent(CompactionPolicy(context_window_tokens=2000))
    options = dataclasses.replace(
        builtin_agent_session_options(definition),
        tracing=AgentTracingOptions(tracer_provider=provider, should_capture_message_content=True),
    )
    flow = AgentSessionFlow(
        BuiltinLoopAgentRunner(definition), flow_type="ReaderAgent", options=options
    )
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s1")
        for turn in range(1, 20):
            await sessions.send_user_message("s1", f"question {turn} {PADDING}")
            snapshot = await sessions.wait_for_user("s1")
            if snapshot.context_summary is not None:
                break
    assert snapshot.context_summary is not None
    spans = exporter.get_finished_spans()
    (compaction,) = [
        span for span in spans if (span.attributes or {}).get("dex.step.type") == "CompactContext"
    ]
    attributes = dict(compaction.attributes or {})
    assert compaction.name == "chat"
    assert attributes["gen_ai.operation.name"] == "chat"
    root = next(
        span
        for span in spans
        if span.name.startswith("invoke_agent")
        and span.context.trace_id == compaction.context.trace_id
    )
    assert compaction.parent is not None
    assert compaction.parent.span_id == root.context.span_id
    summary = snapshot.context_summary
    assert attributes["dex.agent.input_messages.last_key"] == f"{summary.last_sequence:012d}"
    output = json.loads(str(attributes["gen_ai.output.messages"]))
    assert output[0]["parts"][0]["content"].strip() == SUMMARY_TEXT
    assert output[0]["finish_reason"] == "stop"
