"""An attempt stopped by its closing Worker exports no span; a cancelled one keeps its span.

A ``LocalRuntime`` that leaves its ``async with`` cancels the attempts it runs, and
the engine hands them out again as the same attempt. Their ``chat`` or
``execute_tool`` span said ``ERROR`` ``CancelledError`` for an error that never
happened, and a Step execution showed two spans of attempt 1. "An attempt whose
Worker died exports no span"; a Worker that closes is the same case.

An attempt the engine stops (a ``cancel_turn``, its execute timeout) is a failed
attempt and keeps its error span, as on Dex, which cancels an invocation past its
deadline as one it asked to stop. A timed-out attempt used to be taken for one
whose Worker closed: it exported no span, and the trace showed its retry alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from dex_agents import AgentSessionFlow, AgentTracingOptions
from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.function_tools import function_tool
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.app.options import RunModelLimit
from dex_agents.domain.model_io import ModelRequest
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.local import LocalRuntime
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE


class Stall:
    """Holds the first model call (or tool call) until its runtime closes."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.reached = asyncio.Event()
        self.holding = True

    async def point(self, where: str) -> None:
        if where == self.where and self.holding:
            self.reached.set()
            await asyncio.Event().wait()  # until the closing runtime cancels it


def traced_flow(
    stall: Stall, exporter: InMemorySpanExporter, model_timeout: timedelta | None = None
) -> AgentSessionFlow:
    @function_tool(effect=ToolEffect.READ)
    async def lookup_order(order_id: str) -> str:
        """Look up an order by its ID."""
        await stall.point("tool")
        return f"order {order_id}: delivered"

    async def respond(request: ModelRequest) -> ScriptedModelReply:
        await stall.point("model")
        if stall.where == "tool" and not ScriptedModelClient.tool_results(request):
            call = ScriptedToolCall("lookup_order", {"order_id": "7"}, call_id="look")
            return ScriptedModelReply(tool_calls=[call])
        return ScriptedModelReply(text="Done.")

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    definition = AgentDefinition(
        name="support",
        instructions="Help.",
        model=ScriptedModelClient(respond),
        tools=[lookup_order],
    )
    options = dataclasses.replace(
        builtin_agent_session_options(definition),
        tracing=AgentTracingOptions(tracer_provider=provider),
    )
    if model_timeout is not None:
        options = dataclasses.replace(options, run_model_limit=RunModelLimit(timeout=model_timeout))
    return AgentSessionFlow(
        BuiltinLoopAgentRunner(definition), flow_type="SupportAgent", options=options
    )


def runtime(path: Path, flow: AgentSessionFlow) -> LocalRuntime:
    # A short lease: the second runtime takes over the attempt the first one left, and its
    # retry waits a hundredth of the policy's interval.
    return LocalRuntime(
        path,
        [flow],
        poll_interval=timedelta(milliseconds=20),
        lease_duration=timedelta(seconds=1),
        retry_interval_scale=RETRY_INTERVAL_SCALE,
    )


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def spans_across_a_closed_runtime(tmp_path: Path, where: str) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    stall = Stall(where)
    flow = traced_flow(stall, exporter)
    async with runtime(tmp_path / "engine.db", flow) as first:
        sessions = first.sessions(flow)
        await sessions.open_session("s1")
        await sessions.send_user_message("s1", "where is order 7?")
        await stall.reached.wait()
    stall.holding = False
    async with runtime(tmp_path / "engine.db", flow) as second:
        snapshot = await second.sessions(flow).wait_for_user("s1")
    assert snapshot.messages[-1].text == "Done."
    return list(exporter.get_finished_spans())


async def test_a_model_call_its_runtime_closed_on_exports_no_span(tmp_path: Path) -> None:
    spans = await spans_across_a_closed_runtime(tmp_path, "model")
    (chat,) = [span for span in spans if span.name.startswith("chat")]
    assert chat.status.status_code is StatusCode.UNSET
    assert attributes(chat)["dex.step.attempt"] == 1


async def test_a_tool_call_its_runtime_closed_on_exports_no_span(tmp_path: Path) -> None:
    spans = await spans_across_a_closed_runtime(tmp_path, "tool")
    (tool,) = [span for span in spans if span.name.startswith("execute_tool")]
    assert tool.status.status_code is StatusCode.UNSET
    assert attributes(tool)["dex.agent.tool_call.status"] == "succeeded"
    assert all(span.status.status_code is StatusCode.UNSET for span in spans)


async def test_a_model_call_cancel_turn_stopped_keeps_its_error_span(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    stall = Stall("model")
    flow = traced_flow(stall, exporter)
    async with runtime(tmp_path / "engine.db", flow) as engine:
        sessions = engine.sessions(flow)
        await sessions.open_session("s1")
        await sessions.send_user_message("s1", "where is order 7?")
        await stall.reached.wait()
        assert await sessions.cancel_turn("s1", "turn-1")
        await sessions.wait_for_user("s1")
    (chat,) = [span for span in exporter.get_finished_spans() if span.name.startswith("chat")]
    assert chat.status.status_code is StatusCode.ERROR
    assert attributes(chat)["error.type"] == "CancelledError"


async def test_a_model_call_past_its_timeout_keeps_its_error_span_beside_its_retry(
    tmp_path: Path,
) -> None:
    exporter = InMemorySpanExporter()
    stall = Stall("model")
    flow = traced_flow(stall, exporter, model_timeout=timedelta(milliseconds=200))
    async with runtime(tmp_path / "engine.db", flow) as engine:
        sessions = engine.sessions(flow)
        await sessions.open_session("s1")
        await sessions.send_user_message("s1", "where is order 7?")
        await stall.reached.wait()
        stall.holding = False  # the retry answers
        snapshot = await sessions.wait_for_user("s1")
    assert snapshot.messages[-1].text == "Done."
    chats = [span for span in exporter.get_finished_spans() if span.name.startswith("chat")]
    timed_out, retried = sorted(chats, key=lambda span: attributes(span)["dex.step.attempt"])
    assert (
        attributes(timed_out)["dex.step.execution_id"]
        == (attributes(retried)["dex.step.execution_id"])
    )
    assert [attributes(span)["dex.step.attempt"] for span in (timed_out, retried)] == [1, 2]
    assert timed_out.status.status_code is StatusCode.ERROR
    assert attributes(timed_out)["error.type"] == "CancelledError"
    assert retried.status.status_code is StatusCode.UNSET
