"""The session's OpenTelemetry GenAI spans over whole sessions on the embedded engine."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentTracingOptions,
    GenAISemanticConventionsVersion,
)
from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.function_tools import function_tool
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.composition.tracing import build_session_tracer
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.model_io import ModelRequest
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import ModelCallError
from dex_agents.ports.session_schema import AGENT_TRACE_CONTEXT
from dex_agents.ports.tracing import NoTracer
from tests.support.retry_intervals import retrying_runtime


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return {"order_id": order_id, "status": "delivered"}


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refunded order {order_id}"


def lookup_script(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if not results:
        return ScriptedModelReply(
            tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"}, call_id="look")]
        )
    return ScriptedModelReply(text=f"Order: {results[-1].output}")


def refund_script(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if not results:
        return ScriptedModelReply(
            tool_calls=[ScriptedToolCall("refund_order", {"order_id": "7"}, call_id="pay")]
        )
    return ScriptedModelReply(text=f"Done: {results[-1].output}")


def lookup_flow() -> AgentSessionFlow:
    """The order-lookup agent with the Worker's default tracing (a global provider, if any)."""
    definition = AgentDefinition(
        name="support",
        instructions="Help.",
        model=ScriptedModelClient(lookup_script),
        tools=[lookup_order],
    )
    return AgentSessionFlow(
        BuiltinLoopAgentRunner(definition),
        flow_type="SupportAgent",
        options=builtin_agent_session_options(definition),
    )


@dataclasses.dataclass
class Traced:
    sessions: AgentSessionClient
    runtime: LocalRuntime
    exporter: InMemorySpanExporter

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name.startswith(prefix)]

    async def stored_trace_context(self, session_id: str) -> str | None:
        return await self.runtime.flow_client.read_attribute(session_id, AGENT_TRACE_CONTEXT)


@asynccontextmanager
async def traced_session(
    respond: Callable[[ModelRequest], ScriptedModelReply],
    *,
    processors: tuple[SpanProcessor, ...] = (),
    **tracing: Any,
) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    for processor in processors:
        provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    definition = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=ScriptedModelClient(respond),
        tools=[lookup_order, refund_order, check_stock, find_order],
    )
    options = dataclasses.replace(
        builtin_agent_session_options(definition),
        tracing=AgentTracingOptions(tracer_provider=provider, **tracing),
    )
    flow = AgentSessionFlow(
        BuiltinLoopAgentRunner(definition), flow_type="SupportAgent", options=options
    )
    async with retrying_runtime(None, [flow]) as runtime:
        yield Traced(runtime.sessions(flow), runtime, exporter)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_tool_turn_is_one_trace_with_root_chat_and_execute_tool_spans() -> None:
    async with traced_session(lookup_script) as traced:
        run_id = await traced.sessions.start_session("s1")
        await traced.sessions.send_user_message("s1", "where is order 7?")
        snapshot = await traced.sessions.wait_for_user("s1")
        stored = await traced.stored_trace_context("s1")
    assert snapshot.messages[-1].text is not None
    # Every span names the Flow run, as the embedded engine's Step contexts give it.
    assert run_id
    assert {attributes(span).get("dex.run.id") for span in traced.spans()} == {run_id}
    (root,) = traced.named("invoke_agent")
    chats = traced.named("chat")
    (tool,) = traced.named("execute_tool")
    assert root.name == "invoke_agent SupportAgent"
    assert root.kind is SpanKind.INTERNAL
    assert root.parent is None
    assert root.instrumentation_scope is not None
    assert root.instrumentation_scope.name == "dex_agents"
    assert root.instrumentation_scope.schema_url == (
        "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
    )
    trace_id = root.context.trace_id
    assert stored is not None
    assert f"{trace_id:032x}" in stored
    assert len(chats) == 2
    for span in (*chats, tool):
        assert span.context.trace_id == trace_id
        assert span.parent is not None
        assert span.parent.span_id == root.context.span_id
    assert all(chat.kind is SpanKind.CLIENT for chat in chats)
    assert tool.name == "execute_tool lookup_order"
    assert tool.kind is SpanKind.INTERNAL

    root_attributes = attributes(root)
    assert root_attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root_attributes["gen_ai.agent.name"] == "SupportAgent"
    assert root_attributes["gen_ai.conversation.id"] == "s1"
    assert root_attributes["session.id"] == "s1"
    assert root_attributes["dex.flow.id"] == "s1"
    assert root_attributes["dex.step.type"] == "AwaitUserMessage"
    assert root_attributes["dex.step.attempt"] == 1
    assert root_attributes["dex.agent.turn.id"] == "turn-1"
    assert root_attributes["dex.agent.activation.trigger"] == "user_message"
    assert root_attributes["dex.agent.user_message.key"] == "000000000001"
    assert "gen_ai.input.messages" not in root_attributes

    first, second = sorted(chats, key=lambda span: span.start_time or 0)
    first_attributes = attributes(first)
    assert first_attributes["gen_ai.operation.name"] == "chat"
    assert first_attributes["dex.step.type"] == "RunModel"
    assert first_attributes["dex.agent.input_messages.last_key"] == "000000000001"
    assert first_attributes["dex.agent.requested_tool_call.ids"] == ("look",)
    assert first_attributes["gen_ai.usage.input_tokens"] > 0
    assert "gen_ai.input.messages" not in first_attributes
    assert attributes(second)["dex.agent.output_messages.keys"] == ("000000000004",)
    assert first_attributes["dex.step.execution_id"] != attributes(second)["dex.step.execution_id"]

    tool_attributes = attributes(tool)
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_attributes["gen_ai.tool.name"] == "lookup_order"
    assert tool_attributes["gen_ai.tool.call.id"] == "look"
    assert tool_attributes["gen_ai.agent.name"] == "SupportAgent"
    assert tool_attributes["dex.agent.tool.effect"] == "read"
    assert tool_attributes["dex.agent.tool_call.status"] == "succeeded"
    assert tool_attributes["dex.step.type"] == "CallTool"
    assert "gen_ai.tool.call.arguments" not in tool_attributes


async def test_an_approval_starts_a_second_trace_linked_to_the_first() -> None:
    async with traced_session(refund_script, agent_name="Refunds") as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "refund order 7")
        await traced.sessions.wait_for_user("s1")
        assert await traced.sessions.resolve_interrupt("s1", "pay", approved=True)
        snapshot = await traced.sessions.wait_for_user("s1")
    assert snapshot.messages[-1].text == "Done: refunded order 7"
    first_root, second_root = sorted(
        traced.named("invoke_agent"), key=lambda span: span.start_time or 0
    )
    assert first_root.name == second_root.name == "invoke_agent Refunds"
    assert first_root.context.trace_id != second_root.context.trace_id
    assert [link.context.span_id for link in second_root.links] == [first_root.context.span_id]
    second_attributes = attributes(second_root)
    assert second_attributes["dex.agent.activation.trigger"] == "interrupt_resolution"
    assert second_attributes["dex.agent.interrupt.id"] == "pay"
    assert second_attributes["dex.agent.interrupt.approved"] is True
    assert second_attributes["dex.step.type"] == "AwaitToolApproval"
    (tool,) = traced.named("execute_tool")
    assert tool.context.trace_id == second_root.context.trace_id
    assert tool.parent is not None
    assert tool.parent.span_id == second_root.context.span_id
    assert attributes(tool)["dex.step.type"] == "CallSingleAttemptTool"
    chats = sorted(traced.named("chat"), key=lambda span: span.start_time or 0)
    assert [chat.context.trace_id for chat in chats] == [
        first_root.context.trace_id,
        second_root.context.trace_id,
    ]


async def test_message_content_is_captured_only_when_asked() -> None:
    async with traced_session(lookup_script, should_capture_message_content=True) as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "where is order 7?")
        await traced.sessions.wait_for_user("s1")
    (root,) = traced.named("invoke_agent")
    assert json.loads(attributes(root)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "where is order 7?"}]}
    ]
    first, second = sorted(traced.named("chat"), key=lambda span: span.start_time or 0)
    call = {
        "type": "tool_call",
        "id": "look",
        "name": "lookup_order",
        "arguments": '{"order_id": "7"}',
    }
    # The GenAI output message requires its finish_reason.
    output = json.loads(attributes(first)["gen_ai.output.messages"])
    assert output == [{"role": "assistant", "parts": [call], "finish_reason": "tool_call"}]
    final = json.loads(attributes(second)["gen_ai.output.messages"])
    assert [message["finish_reason"] for message in final] == ["stop"]
    # What the model got: the call once (stored as a message, and recorded), then its result.
    inputs = json.loads(attributes(second)["gen_ai.input.messages"])
    assert [[part["type"] for part in item["parts"]] for item in inputs] == [
        ["text"],
        ["tool_call"],
        ["tool_call_response"],
    ]
    assert inputs[1]["parts"] == [call]
    (tool,) = traced.named("execute_tool")
    assert json.loads(attributes(tool)["gen_ai.tool.call.arguments"]) == {"order_id": "7"}
    assert "delivered" in attributes(tool)["gen_ai.tool.call.result"]


async def test_a_rejected_calls_captured_result_is_what_the_model_read() -> None:
    # A rejected record has no output or error: its result showed as null.
    async with traced_session(refund_script, should_capture_message_content=True) as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "refund order 7")
        await traced.sessions.wait_for_user("s1")
        assert await traced.sessions.resolve_interrupt(
            "s1", "pay", approved=False, rejection_message="not this one"
        )
        snapshot = await traced.sessions.wait_for_user("s1")
    assert snapshot.messages[-1].text == "Done: not this one"
    last = max(traced.named("chat"), key=lambda span: span.start_time or 0)
    inputs = json.loads(attributes(last)["gen_ai.input.messages"])
    assert inputs[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "pay", "response": "not this one"}],
    }


async def test_v1_36_0_uses_its_schema_url_and_never_carries_content() -> None:
    async with traced_session(
        lookup_script,
        should_capture_message_content=True,
        semantic_conventions_version=GenAISemanticConventionsVersion.V1_36_0,
    ) as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "where is order 7?")
        await traced.sessions.wait_for_user("s1")
    spans = traced.spans()
    assert len(spans) == 4
    for span in spans:
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.schema_url == "https://opentelemetry.io/schemas/1.36.0"
        names = attributes(span)
        assert not {"gen_ai.input.messages", "gen_ai.output.messages"} & names.keys()
        assert "gen_ai.tool.call.arguments" not in names
        assert "gen_ai.provider.name" not in names


class BrokenProcessor(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("broken span processor")


async def test_a_raising_span_processor_never_fails_the_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import dex_agents.ports.tracing as tracing_port

    tracing_port._failure_logged = False
    caplog.set_level(logging.DEBUG, logger="dex_agents.tracing")
    async with traced_session(lookup_script, processors=(BrokenProcessor(),)) as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "where is order 7?")
        snapshot = await traced.sessions.wait_for_user("s1")
    assert snapshot.messages[-1].text is not None
    assert snapshot.messages[-1].text.startswith("Order: ")
    records = [record for record in caplog.records if record.name == "dex_agents.tracing"]
    warnings = [record for record in records if record.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].exc_info is not None
    assert all(record.levelno == logging.DEBUG for record in records if record not in warnings)


async def test_tracing_disabled_emits_nothing_and_stores_nothing() -> None:
    async with traced_session(lookup_script, is_enabled=False) as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "where is order 7?")
        snapshot = await traced.sessions.wait_for_user("s1")
        stored = await traced.stored_trace_context("s1")
    assert snapshot.messages[-1].text is not None
    assert traced.spans() == []
    assert stored is None


FLAKY_CALLS: list[str] = []


@function_tool(effect=ToolEffect.READ)
async def check_stock(item: str) -> str:
    """Check an item's stock; the first call fails, the retry succeeds."""
    FLAKY_CALLS.append(item)
    if len(FLAKY_CALLS) == 1:
        raise ConnectionError("stock service unavailable")
    return f"{item}: 3 left"


@function_tool(effect=ToolEffect.READ)
async def find_order(order_id: str) -> str:
    """Find an order; this one always tells the model it does not exist."""
    raise ToolExecutionError(f"no order {order_id}")


def calling(name: str, arguments: dict[str, str]) -> Callable[[ModelRequest], ScriptedModelReply]:
    def respond(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if not results:
            return ScriptedModelReply(tool_calls=[ScriptedToolCall(name, arguments, "c1")])
        return ScriptedModelReply(text=f"Result: {results[-1].output}")

    return respond


@pytest.mark.parametrize("captured", [False, True], ids=["content off", "content on"])
async def test_a_failed_attempt_has_an_error_span_and_its_retry_a_second_span(
    captured: bool,
) -> None:
    FLAKY_CALLS.clear()
    async with traced_session(
        calling("check_stock", {"item": "lamp"}), should_capture_message_content=captured
    ) as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "is the lamp in stock?")
        snapshot = await traced.sessions.wait_for_user("s1")
    assert snapshot.messages[-1].text == "Result: lamp: 3 left"
    failed, retried = sorted(traced.named("execute_tool"), key=lambda span: span.start_time or 0)
    assert failed.status.status_code is StatusCode.ERROR
    assert attributes(failed)["error.type"] == "ConnectionError"
    (event,) = failed.events
    assert event.name == "exception"
    # A retried attempt's last error becomes the result the model reads: content too.
    event_attributes = dict(event.attributes or {})
    texts = [failed.status.description, event_attributes["exception.message"]]
    assert ["stock service unavailable" in str(text) for text in texts] == [captured] * 2
    assert attributes(failed)["dex.step.attempt"] == 1
    assert retried.status.status_code is StatusCode.UNSET
    assert attributes(retried)["dex.step.attempt"] == 2
    assert attributes(retried)["dex.agent.tool_call.status"] == "succeeded"
    assert (
        attributes(failed)["dex.step.execution_id"] == attributes(retried)["dex.step.execution_id"]
    )


def rate_limited(request: ModelRequest) -> ScriptedModelReply:
    error = ModelCallError("openai model call failed with HTTP 429: slow down")
    error.retry_after = timedelta(hours=1)  # past RunModel's budget: the turn fails now
    raise error


async def test_a_model_call_that_asks_for_a_wait_keeps_its_own_error_type() -> None:
    async with traced_session(rate_limited) as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "hello")
        await traced.sessions.wait_for_user("s1")
    (chat,) = traced.named("chat")
    assert chat.status.status_code is StatusCode.ERROR
    assert attributes(chat)["error.type"] == "ModelCallError"


@pytest.mark.parametrize("captured", [False, True], ids=["content off", "content on"])
async def test_a_tool_execution_error_sets_its_error_type(captured: bool) -> None:
    # Its text is the tool's result the model reads: content, on the span only when captured.
    async with traced_session(
        calling("find_order", {"order_id": "9"}), should_capture_message_content=captured
    ) as traced:
        await traced.sessions.open_session("s1")
        await traced.sessions.send_user_message("s1", "find order 9")
        await traced.sessions.wait_for_user("s1")
    (tool,) = traced.named("execute_tool")
    assert tool.status.status_code is StatusCode.ERROR
    assert attributes(tool)["error.type"] == "ToolExecutionError"
    assert attributes(tool)["dex.agent.tool_call.status"] == "failed"
    (event,) = tool.events
    assert event.name == "exception"
    event_attributes = dict(event.attributes or {})
    assert str(event_attributes["exception.type"]).endswith("ToolExecutionError")
    stacktrace = str(event_attributes["exception.stacktrace"])
    assert "find_order" in stacktrace  # the frames stay either way
    texts = [tool.status.description, event_attributes["exception.message"], stacktrace]
    assert ["no order 9" in str(text) for text in texts] == [captured] * 3


def test_without_the_api_the_session_uses_no_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "dex_agents.adapters.otel.tracer", raising=False)
    assert isinstance(build_session_tracer(AgentTracingOptions()), NoTracer)


def test_tracing_disabled_never_imports_opentelemetry() -> None:
    program = (
        "import sys\n"
        "from dex_agents import AgentSessionOptions, AgentTracingOptions\n"
        "from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow\n"
        "from dex_agents.composition.tracing import build_session_tracer\n"
        "build_session_tracer(AgentTracingOptions(is_enabled=False))\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True)


def test_the_tracing_module_names_the_logger_failures_go_to() -> None:
    import dex_agents
    import dex_agents.tracing as tracing

    assert tracing.TRACING_LOGGER.name == "dex_agents.tracing"
    assert tracing.AgentTracingOptions is dex_agents.AgentTracingOptions
    assert tracing.GenAISemanticConventionsVersion is dex_agents.GenAISemanticConventionsVersion


def test_with_the_api_and_no_provider_set_no_span_starts_and_nothing_extra_is_stored() -> None:
    # In a process of its own: a global provider can be set once per process.
    program = """
import asyncio
from datetime import timedelta
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from dex_agents import GenAISemanticConventionsVersion
from dex_agents.adapters.otel.tracer import OpenTelemetrySessionTracer
from dex_agents.local import LocalRuntime
from dex_agents.ports.session_schema import AGENT_TRACE_CONTEXT
from tests.tracing.test_session_spans import lookup_flow

version = GenAISemanticConventionsVersion.V1_42_0_DEV
assert not OpenTelemetrySessionTracer(None, version).enabled
assert not OpenTelemetrySessionTracer(trace.NoOpTracerProvider(), version).enabled
assert OpenTelemetrySessionTracer(TracerProvider(), version).enabled


async def main():
    flow = lookup_flow()
    tracer = flow.runtime.tracing.tracer
    assert not tracer.enabled
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s1")
        await sessions.send_user_message("s1", "where is order 7?")
        await sessions.wait_for_user("s1")
        # The API with no SDK: the spans are no-ops, and nothing extra is stored.
        assert await runtime.flow_client.read_attribute("s1", AGENT_TRACE_CONTEXT) is None
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        assert tracer.enabled
        await sessions.send_user_message("s1", "and order 8?")
        await sessions.wait_for_user("s1")
    names = sorted(span.name.split()[0] for span in exporter.get_finished_spans())
    assert names == ["chat", "chat", "execute_tool", "invoke_agent"], names


asyncio.run(main())
"""
    subprocess.run(
        [sys.executable, "-c", program], check=True, cwd=Path(__file__).resolve().parents[2]
    )


def test_a_tracer_provider_variable_naming_no_provider_skips_the_spans_not_the_turn() -> None:
    # The API loads OTEL_PYTHON_TRACER_PROVIDER's provider by name and raises, on every
    # ask, for one not installed: AwaitUserMessage failed three times and the message was lost.
    program = """
import asyncio
import logging
import os
from datetime import timedelta
from dex_agents.local import LocalRuntime
from tests.tracing.test_session_spans import lookup_flow

failures = []
logging.getLogger("dex_agents.tracing").addHandler(logging.Handler())
logging.getLogger("dex_agents.tracing").handlers[0].emit = failures.append


async def main():
    flow = lookup_flow()
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s1")
        await sessions.send_user_message("s1", "where is order 7?")
        snapshot = await sessions.wait_for_user("s1", timeout=timedelta(seconds=30))
    assert snapshot.state.turn_count == 1, snapshot
    assert snapshot.state.last_turn_error is None, snapshot.state
    assert snapshot.messages[0].text == "where is order 7?", snapshot.messages
    assert "finding the tracer provider" in failures[0].getMessage(), failures


asyncio.run(main())
"""
    subprocess.run(
        [sys.executable, "-c", program],
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "OTEL_PYTHON_TRACER_PROVIDER": "no_such_tracer_provider"},
    )
