"""``OpenTelemetrySessionTracer``: the tracing port over the OpenTelemetry API.

Every OpenTelemetry call is guarded: a failure is reported on the
``dex_agents.tracing`` logger and the span is skipped, never raised into a Step.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from dex_agents.domain.tracing import GenAISemanticConventionsVersion
from dex_agents.ports.tracing import (
    NO_SPAN,
    UNCHANGED_CONTEXT,
    AttributeValue,
    SpanKind,
    TracedSpan,
    report_tracing_failure,
)

INSTRUMENTATION_SCOPE = "dex_agents"
"""The instrumentation scope name of every span the session emits."""

_PROPAGATOR = TraceContextTextMapPropagator()
_NO_OP_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_KINDS = {SpanKind.INTERNAL: trace.SpanKind.INTERNAL, SpanKind.CLIENT: trace.SpanKind.CLIENT}


@functools.cache
def _version() -> str | None:
    # Reading package metadata parses files on disk: once per process, not once per span.
    try:
        return metadata.version("dex-agents")
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1024)
def _span_context(traceparent: str) -> trace.SpanContext | None:
    # The stored traceparents repeat (one root per activation is read by each of its
    # Steps), and the propagator's parse builds a Context each time: cache the result.
    extracted = _PROPAGATOR.extract({"traceparent": traceparent})
    span_context = trace.get_current_span(extracted).get_span_context()
    return span_context if span_context.is_valid else None


def _textless(error: BaseException) -> dict[str, AttributeValue]:
    # The exception event's own attributes, overriding the SDK's: the frames stay, the
    # text (and the chained exceptions', which format_exception would add) goes.
    frames = traceback.format_exception(type(error), None, error.__traceback__)
    stacktrace = "".join(frames[:-1]) + f"{type(error).__qualname__}\n"
    return {"exception.message": "", "exception.stacktrace": stacktrace}


class _Span:
    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._ended = False

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        try:
            self._span.set_attributes(dict(attributes))
        except Exception:
            report_tracing_failure("setting span attributes")

    def record_error(self, error: BaseException, *, with_text: bool = True) -> None:
        try:
            description = (str(error) or None) if with_text else None
            self._span.set_status(trace.Status(trace.StatusCode.ERROR, description))
            self._span.set_attribute("error.type", type(error).__name__)
            self._span.record_exception(error, attributes=None if with_text else _textless(error))
        except Exception:
            report_tracing_failure("recording a span's error")

    def set_error(self, error_type: str, description: str) -> None:
        try:
            self._span.set_status(trace.Status(trace.StatusCode.ERROR, description))
            self._span.set_attribute("error.type", error_type)
        except Exception:
            report_tracing_failure("recording a span's error")

    def end(self, end_time_ns: int | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self._span.end(end_time_ns)
        except Exception:
            report_tracing_failure("ending a span")

    def traceparent(self) -> str | None:
        try:
            span_context = self._span.get_span_context()
            if not span_context.is_valid:
                return None
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier, trace.set_span_in_context(self._span))
            return carrier.get("traceparent")
        except Exception:
            report_tracing_failure("serializing a span context")
            return None

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        with _attached(lambda: trace.set_span_in_context(self._span)):
            yield


@contextlib.contextmanager
def _attached(make: Any) -> Iterator[None]:
    token = None
    try:
        token = otel_context.attach(make())
    except Exception:
        report_tracing_failure("changing the current context")
    try:
        yield
    finally:
        if token is not None:
            try:
                otel_context.detach(token)
            except Exception:
                report_tracing_failure("restoring the current context")


class OpenTelemetrySessionTracer:
    """Emits the session's spans through ``tracer_provider`` (``None``: the global provider).

    The tracer is looked up at the first span and kept. While no provider is
    given and none is set globally, or the provider is a no-op one, it is not
    ``enabled`` and the session starts no span; a global provider set later gets
    the spans from then on (the API's proxy tracer delegates to it too).
    """

    def __init__(
        self,
        tracer_provider: Any | None,
        version: GenAISemanticConventionsVersion,
    ) -> None:
        self._provider = tracer_provider
        self._version = version
        self._cached: trace.Tracer | None = None

    @property
    def enabled(self) -> bool:
        # With no provider given and none set globally (the API's proxy), or a no-op one,
        # every span is a no-op: building the spans' attributes and entering their
        # contexts cost a scripted turn about 2% of its CPU for nothing. Asked per span,
        # so a global provider set later gets the spans from then on.
        try:
            provider = self._provider if self._provider is not None else trace.get_tracer_provider()
        except Exception:
            # OTEL_PYTHON_TRACER_PROVIDER naming no installed provider raises here, on every
            # call: no span then, and the Step goes on, as for any tracing failure.
            report_tracing_failure("finding the tracer provider")
            return False
        return not isinstance(provider, _NO_OP_PROVIDERS)

    def _tracer(self) -> trace.Tracer:
        # Looking the tracer up builds a Tracer and its scope each time: a third of the
        # cost of a span with the SDK (bench/tracing_overhead.py).
        if self._cached is None:
            self._cached = trace.get_tracer(
                INSTRUMENTATION_SCOPE,
                _version(),
                tracer_provider=self._provider,
                schema_url=self._version.schema_url,
            )
        return self._cached

    def start_span(
        self,
        name: str,
        *,
        kind: SpanKind,
        attributes: Mapping[str, AttributeValue],
        parent: str | None,
        links: Sequence[str] = (),
        start_time_ns: int | None = None,
    ) -> TracedSpan:
        try:
            parent_context = otel_context.Context()
            if parent is not None:
                parent_span = _span_context(parent)
                if parent_span is not None:
                    parent_context = trace.set_span_in_context(
                        trace.NonRecordingSpan(parent_span), parent_context
                    )
            span_links = [
                trace.Link(span_context)
                for span_context in (_span_context(link) for link in links)
                if span_context is not None
            ]
            span = self._tracer().start_span(
                name,
                context=parent_context,
                kind=_KINDS[kind],
                attributes=dict(attributes),
                links=span_links,
                start_time=start_time_ns,
            )
        except Exception:
            report_tracing_failure(f"starting span {name!r}")
            return NO_SPAN
        return _Span(span)

    def current_parent(self, traceparent: str | None) -> contextlib.AbstractContextManager[None]:
        if traceparent is None:
            return UNCHANGED_CONTEXT  # each model Step with tracing off: no generator

        def make() -> otel_context.Context:
            span_context = _span_context(traceparent)
            if span_context is None:
                return otel_context.get_current()
            return trace.set_span_in_context(trace.NonRecordingSpan(span_context))

        return _attached(make)
