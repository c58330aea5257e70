"""``execute_tool`` spans of ``CallTool``, ``CallSingleAttemptTool`` and ``PollToolTask`` attempts."""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import TYPE_CHECKING

from dex_agents.app.tracing.common import (
    agent_name,
    captures_content,
    common_attributes,
    end_with_result,
    stopped_with_its_worker,
)
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.ports.session_schema import AGENT_TOOL_CALLS
from dex_agents.ports.step_contexts import StepContext
from dex_agents.ports.tracing import (
    NO_SPAN,
    AttributeValue,
    SpanKind,
    TracedSpan,
    report_tracing_failure,
)

if TYPE_CHECKING:
    from dex_agents.app.session import SessionRuntime


class ToolAttempt:
    """One tool Step attempt's ``execute_tool`` span, started when the tool starts."""

    def __init__(self, context: StepContext, runtime: SessionRuntime) -> None:
        self._context = context
        self._runtime = runtime
        # The span's ``current()`` block, entered at ``begin`` and left when the attempt ends.
        self._current: contextlib.AbstractContextManager[None] | None = None
        self.span: TracedSpan = NO_SPAN
        self.tool_call_id: str | None = None
        self.has_failed = False

    def begin(self, record: AgentToolCall) -> None:
        """The tool starts for ``record``: its span starts and is current until the attempt ends."""
        tracer = self._runtime.tracing.tracer
        if not tracer.enabled or self.span is not NO_SPAN:
            return
        try:
            attributes = common_attributes(self._context, record.turn_id, "execute_tool")
            attributes.update(
                {
                    "gen_ai.agent.name": agent_name(self._runtime),
                    "gen_ai.tool.name": record.tool_name,
                    "gen_ai.tool.call.id": record.tool_call_id,
                    "dex.agent.tool.effect": str(record.effect),
                }
            )
            if captures_content(self._runtime):
                attributes["gen_ai.tool.call.arguments"] = record.arguments
            self.span = tracer.start_span(
                f"execute_tool {record.tool_name}",
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                parent=record.trace_context,
            )
            self.tool_call_id = record.tool_call_id
            current = self.span.current()
            current.__enter__()
            self._current = current
        except Exception:
            report_tracing_failure("starting the execute_tool span")

    def leave(self) -> None:
        """The span stops being current (the attempt ended; its span ends after this)."""
        current, self._current = self._current, None
        if current is not None:
            current.__exit__(None, None, None)

    def failed(self, error: BaseException) -> None:
        """The tool failed with ``error`` though the Step handled it.

        Its text is the tool's result the model reads: content, on the span only
        when content is captured.
        """
        self.has_failed = True
        self.span.record_error(error, with_text=captures_content(self._runtime))


def tool_attempt(
    context: StepContext, runtime: SessionRuntime
) -> contextlib.AbstractContextManager[ToolAttempt]:
    """Trace one ``CallTool``, ``CallSingleAttemptTool`` or ``PollToolTask`` attempt.

    The span starts at ``ToolAttempt.begin`` and ends with the attempt, with the
    record's final status.
    """
    return _ToolAttemptScope(context, runtime)


class _ToolAttemptScope:
    """``tool_attempt``'s block. A class, not a ``contextlib.contextmanager`` around an
    ``ExitStack``: those cost about 16 K instructions more a tool Step (``bench/turns-log.md``,
    the ninth pass).

    Its rule, as the generator had it: when the block ends, the span stops being current
    before it ends; a block that ends by an exception records it on the span (its text
    only when content is captured) and ends the span, unless the attempt stopped with its
    Worker: then the span never ends, so it is never exported. The exception goes on
    either way.
    """

    __slots__ = ("_attempt", "_context", "_runtime")

    def __init__(self, context: StepContext, runtime: SessionRuntime) -> None:
        self._context = context
        self._runtime = runtime

    def __enter__(self) -> ToolAttempt:
        self._attempt = ToolAttempt(self._context, self._runtime)
        return self._attempt

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        context = self._context
        runtime = self._runtime
        attempt = self._attempt
        attempt.leave()  # the span stops being current before it ends
        if error is not None:
            if stopped_with_its_worker(context, error):
                # Never ended, so never exported: an OpenTelemetry span exports when it ends.
                return
            # A retried tool's last error text is the result the model reads: content.
            attempt.has_failed = True
            attempt.span.record_error(error, with_text=captures_content(runtime))
        _finish_attempt(context, runtime, attempt)


def _finish_attempt(context: StepContext, runtime: SessionRuntime, attempt: ToolAttempt) -> None:
    if attempt.tool_call_id is not None:
        _finish_tool_span(context, runtime, attempt, attempt.tool_call_id)


def _finish_tool_span(
    context: StepContext, runtime: SessionRuntime, attempt: ToolAttempt, tool_call_id: str
) -> None:
    span = attempt.span
    try:
        final = context.state.get_instance(AGENT_TOOL_CALLS, tool_call_id)
        if final is not None:
            attributes: dict[str, AttributeValue] = {
                "dex.agent.tool_call.status": str(final.status)
            }
            if captures_content(runtime) and final.output is not None:
                attributes["gen_ai.tool.call.result"] = final.output
            span.set_attributes(attributes)
    except Exception:
        report_tracing_failure("annotating the execute_tool span")
    # The status is the staged record's: exported once it is committed, or marked dropped.
    end_with_result(context, span, failed=attempt.has_failed)
