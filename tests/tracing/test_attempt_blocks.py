"""The blocks of a model or tool Step attempt (``model_attempt``, ``tool_attempt``): what
their ends do with the span when the attempt returns, raises, is cancelled by its engine, or
stops with its Worker.

``model_attempt``: the activation's root is current while the block runs and is current
no longer after it, whichever way it ends; an attempt that ends by an exception records it
on its ``chat`` span, unless it stopped with its Worker (no span: it runs again as the same
attempt). ``tool_attempt``: the ``execute_tool`` span stops being current before it ends,
and is never ended (so never exported) for an attempt that stopped with its Worker. The
exception goes on in every case. Both blocks were generators until 2026-12-07; these tests
hold their rules in the classes that replaced them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from dex_agents.adapters.otel.tracer import OpenTelemetrySessionTracer
from dex_agents.app import tracing
from dex_agents.app.session import SessionRuntime
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.domain.tracing import GenAISemanticConventionsVersion
from dex_agents.ports.session_schema import AGENT_TRACE_CONTEXT
from dex_agents.ports.tracing import SpanKind
from tests.app.turn_control_fakes import ACTIVE, FakeStepContext, record, runtime, staged

ROOT_TRACE = 0x0AF7651916CD43DD8448EB211C80319C
ROOT_SPAN = 0x00F067AA0BA902B7
ROOT = f"00-{ROOT_TRACE:032x}-{ROOT_SPAN:016x}-01"
SECRET = "the tool's secret text"
CALL = record("call-1", ToolCallStatus.APPROVED, trace_context=ROOT)

Attempt = Callable[[], Coroutine[Any, Any, None]]


@dataclass
class Context(FakeStepContext):
    """A context whose engine did (``requested``) or did not ask the attempt to stop."""

    requested: bool = False

    def is_cancellation_requested(self) -> bool:
        return self.requested


class CurrentAtEnd(SpanProcessor):
    """Notes, for each span that ends, the span current at that moment."""

    def __init__(self) -> None:
        self.current: dict[str, trace.Span] = {}

    def on_end(self, span: ReadableSpan) -> None:
        self.current[span.name] = trace.get_current_span()


@dataclass
class Traced:
    runtime: SessionRuntime
    exporter: InMemorySpanExporter
    at_end: CurrentAtEnd

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def traced() -> Iterator[Traced]:
    exporter = InMemorySpanExporter()
    at_end = CurrentAtEnd()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(at_end)
    session = runtime()  # content is not captured: a tool's error text stays off its span
    session.tracing.install(
        OpenTelemetrySessionTracer(provider, GenAISemanticConventionsVersion.V1_42_0_DEV)
    )
    yield Traced(session, exporter, at_end)
    provider.shutdown()


def context(requested: bool = False) -> Context:
    state = staged(ACTIVE, values={AGENT_TRACE_CONTEXT: ROOT}, records=[CALL])
    return Context(state, requested=requested)


def current_trace_id() -> int:
    return trace.get_current_span().get_span_context().trace_id


def model_block(
    traced: Traced, context: Context, seen: list[int], raised: BaseException | None
) -> Attempt:
    async def attempt() -> None:
        # Kept until after the block: a generator left suspended would restore the context
        # when collected, which must not be what restores it.
        block = tracing.model_attempt(context, traced.runtime, "turn-1")
        try:
            with block as chat:
                chat.started([])
                seen.append(current_trace_id())
                await asyncio.sleep(0)
                if raised is not None:
                    raise raised
        finally:
            seen.append(current_trace_id())

    return attempt


def tool_block(
    traced: Traced, context: Context, seen: list[int], raised: BaseException | None
) -> Attempt:
    async def attempt() -> None:
        block = tracing.tool_attempt(context, traced.runtime)
        try:
            with block as tool:
                tool.begin(CALL)
                seen.append(current_trace_id())
                await asyncio.sleep(0)
                if raised is not None:
                    raise raised
        finally:
            seen.append(current_trace_id())

    return attempt


async def ended(attempt: Attempt, cancel: bool) -> BaseException | None:
    """Run ``attempt`` in a task, cancelled at its first suspension when ``cancel``; what it
    raised."""
    task = asyncio.ensure_future(attempt())
    if cancel:
        await asyncio.sleep(0)
        task.cancel()
    try:
        await task
    except BaseException as error:
        return error
    return None


# How an attempt ends: what it raises (or a cancellation of its task), and whether its
# engine asked it to stop.
RETURNS = ("returns", None, False, False)
RAISES = ("raises", RuntimeError(SECRET), False, False)
CANCELLED = ("is cancelled by its engine", None, True, True)
STOPPED = ("stops with its worker", None, True, False)


@pytest.mark.parametrize(
    ("ending", "raised", "cancel", "requested"), [RETURNS, RAISES, CANCELLED, STOPPED]
)
async def test_a_model_attempt_keeps_its_span_unless_its_worker_stopped(
    traced: Traced, ending: str, raised: BaseException | None, cancel: bool, requested: bool
) -> None:
    seen: list[int] = []
    error = await ended(model_block(traced, context(requested), seen, raised), cancel)
    assert seen == [ROOT_TRACE, 0]  # the root is current in the block only
    if cancel:
        assert isinstance(error, asyncio.CancelledError)
    else:
        assert error is raised
    spans = traced.spans()
    if ending == "stops with its worker":
        assert spans == []
        return
    [chat] = spans
    assert chat.parent is not None
    assert chat.parent.span_id == ROOT_SPAN
    if error is None:
        assert chat.status.status_code is StatusCode.UNSET
    else:
        assert chat.status.status_code is StatusCode.ERROR
        assert chat.attributes is not None
        assert chat.attributes["error.type"] == type(error).__name__
        assert [event.name for event in chat.events] == ["exception"]


@pytest.mark.parametrize(
    ("ending", "raised", "cancel", "requested"), [RETURNS, RAISES, CANCELLED, STOPPED]
)
async def test_a_tool_attempt_leaves_its_span_before_it_ends_it(
    traced: Traced, ending: str, raised: BaseException | None, cancel: bool, requested: bool
) -> None:
    seen: list[int] = []
    error = await ended(tool_block(traced, context(requested), seen, raised), cancel)
    assert seen == [ROOT_TRACE, 0]  # the span (of the root's trace) is current in the block only
    if cancel:
        assert isinstance(error, asyncio.CancelledError)
    else:
        assert error is raised
    spans = traced.spans()
    if ending == "stops with its worker":
        assert spans == []  # never ended, so never exported
        return
    [tool] = spans
    assert tool.name == "execute_tool refund"
    assert traced.at_end.current[tool.name] is trace.INVALID_SPAN
    assert tool.attributes is not None
    assert tool.attributes["dex.agent.tool_call.status"] == "approved"
    if error is None:
        assert tool.status.status_code is StatusCode.UNSET
    else:
        assert tool.status.status_code is StatusCode.ERROR
        assert tool.attributes["error.type"] == type(error).__name__
        assert SECRET not in str(tool.status.description)
        [event] = tool.events
        assert event.attributes is not None
        assert event.attributes["exception.message"] == ""


def test_the_check_sees_a_span_that_ends_while_current(traced: Traced) -> None:
    """``CurrentAtEnd`` sees a span that ends while current (so the check above can fail)."""
    tracer = traced.runtime.tracing.tracer
    span = tracer.start_span("x", kind=SpanKind.INTERNAL, attributes={}, parent=None)
    with span.current():
        span.end()
    assert isinstance(traced.at_end.current["x"], Span)
