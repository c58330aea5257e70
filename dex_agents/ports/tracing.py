"""The tracing port: spans the session's Steps emit, without knowing OpenTelemetry.

Contract: no method ever raises. An implementation guards every call into its
tracing library and reports a failure with ``report_tracing_failure``, so tracing
never fails or retries a Step. Traceparents are W3C ``traceparent`` strings; a
method that cannot produce a valid one returns ``None``.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

TRACING_LOGGER = logging.getLogger("dex_agents.tracing")
"""Where tracing failures are logged."""

AttributeValue = str | bool | int | float | Sequence[str]
"""An attribute value a span accepts."""

_failure_logged = False


def report_tracing_failure(what: str) -> None:
    """Log a tracing failure from inside an ``except`` block.

    The first failure in a process logs a warning with its traceback; later ones
    log at debug level.
    """
    global _failure_logged
    if not _failure_logged:
        _failure_logged = True
        TRACING_LOGGER.warning("tracing failed (%s); the span is skipped", what, exc_info=True)
    else:
        TRACING_LOGGER.debug("tracing failed (%s); the span is skipped", what, exc_info=True)


class SpanKind(enum.Enum):
    """The span kinds the session emits."""

    INTERNAL = "internal"
    CLIENT = "client"


class TracedSpan(Protocol):
    """A started span. Every method is a no-op after a failure."""

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Add attributes."""
        ...

    def record_error(self, error: BaseException, *, with_text: bool = True) -> None:
        """Status ``ERROR``, ``error.type`` the class name, and the exception as an event.

        ``with_text=False`` leaves the error's text out of the status and the event
        (its message and the stacktrace's last line): for an error whose text is
        content, such as a failed tool's result, when content is not captured.
        """
        ...

    def set_error(self, error_type: str, description: str) -> None:
        """Status ``ERROR`` and ``error.type`` ``error_type``, with no exception event.

        For an attempt that raised nothing but whose result its engine dropped.
        """
        ...

    def end(self, end_time_ns: int | None = None) -> None:
        """End the span (at most once), at ``end_time_ns`` (ns since the epoch) or now."""
        ...

    def traceparent(self) -> str | None:
        """The span's ``traceparent`` when its context is valid, sampled or not."""
        ...

    def current(self) -> contextlib.AbstractContextManager[None]:
        """Make this span the current span while the block runs."""
        ...


class SessionTracer(Protocol):
    """Starts the session's spans."""

    @property
    def enabled(self) -> bool:
        """``False`` for a tracer that emits nothing."""
        ...

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
        """Start a span; ``parent`` ``None`` starts a new trace, ignoring the current span."""
        ...

    def current_parent(self, traceparent: str | None) -> contextlib.AbstractContextManager[None]:
        """Make the remote span ``traceparent`` current while the block runs."""
        ...


class _NoSpan:
    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        pass

    def record_error(self, error: BaseException, *, with_text: bool = True) -> None:
        pass

    def set_error(self, error_type: str, description: str) -> None:
        pass

    def end(self, end_time_ns: int | None = None) -> None:
        pass

    def traceparent(self) -> str | None:
        return None

    def current(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


UNCHANGED_CONTEXT: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
"""A block that leaves the current span as it is. One object serves every block: a
``nullcontext`` keeps nothing between its uses, and a ``contextlib.contextmanager`` that
only yields cost about 10 K instructions a use (``bench/turns-log.md``, the ninth pass)."""

NO_SPAN: TracedSpan = _NoSpan()
"""A span that records nothing."""


class NoTracer:
    """The tracer of a session with tracing disabled or without OpenTelemetry."""

    @property
    def enabled(self) -> bool:
        return False

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
        return NO_SPAN

    def current_parent(self, traceparent: str | None) -> contextlib.AbstractContextManager[None]:
        return UNCHANGED_CONTEXT
