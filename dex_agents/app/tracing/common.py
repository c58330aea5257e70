"""What every session span shares: the tracer slot, the common attributes, and content JSON."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.ports.step_contexts import (
    AttemptResult,
    StepContext,
    on_attempt_result,
    step_run_id,
)
from dex_agents.ports.tracing import (
    AttributeValue,
    NoTracer,
    SessionTracer,
    TracedSpan,
    report_tracing_failure,
)

RESULT_DROPPED = "dex.step.result_dropped"
"""The attribute of a span whose attempt's result its engine dropped: why (``lease_lost``,
``commit_failed``)."""

if TYPE_CHECKING:
    from dex_agents.app.session import SessionRuntime


@dataclass
class TracerSlot:
    """The tracer of one Flow type's Steps; the composition layer installs the adapter."""

    tracer: SessionTracer = field(default_factory=NoTracer)

    def install(self, tracer: SessionTracer) -> None:
        """Use ``tracer`` from now on."""
        self.tracer = tracer


def agent_name(runtime: SessionRuntime) -> str:
    return runtime.options.tracing.agent_name or runtime.flow_type


def captures_content(runtime: SessionRuntime) -> bool:
    tracing = runtime.options.tracing
    return (
        tracing.should_capture_message_content
        and tracing.semantic_conventions_version.carries_content
    )


def common_attributes(
    context: StepContext, turn_id: str | None, operation: str
) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "gen_ai.conversation.id": context.flow_id,
        "session.id": context.flow_id,
        "dex.flow.id": context.flow_id,
        "dex.step.type": context.step_type,
        "dex.step.execution_id": context.step_execution_id,
        "dex.step.attempt": context.attempt,
        "gen_ai.operation.name": operation,
    }
    run_id = step_run_id(context)
    if run_id is not None:
        attributes["dex.run.id"] = run_id
    if turn_id:
        attributes["dex.agent.turn.id"] = turn_id
    return attributes


def text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def renders_as_result(message: AgentMessage) -> bool:
    """Whether ``message_parts`` renders ``message`` as a tool call's result (else a call,
    when it names one)."""
    return message.role is MessageRole.TOOL or message.tool_output is not None


def message_parts(message: AgentMessage) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if renders_as_result(message):
        parts.append(
            {
                "type": "tool_call_response",
                "id": message.tool_call_id,
                "response": message.tool_output,
            }
        )
    elif message.tool_call_id is not None:
        if message.text:
            parts.append({"type": "text", "content": message.text})
        parts.append(
            {
                "type": "tool_call",
                "id": message.tool_call_id,
                "name": message.tool_name,
                "arguments": message.tool_arguments,
            }
        )
    elif message.text is not None:
        parts.append({"type": "text", "content": message.text})
    return {"role": str(message.role), "parts": parts}


def content_json(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False)
    except Exception:
        report_tracing_failure("serializing span content")
        return None


def stopped_with_its_worker(context: StepContext, error: BaseException) -> bool:
    """Whether the attempt ended because its Worker stopped, not because it failed.

    A ``CancelledError`` that no RPC, decision or missed heartbeat asked for (the
    Worker is closing) is handed out again as the same attempt, so its span would
    be a second span of one attempt, an error that never happened. It exports
    none, as an attempt whose Worker died ("One trace per activation").
    """
    if not isinstance(error, asyncio.CancelledError):
        return False
    try:
        return not context.is_cancellation_requested()
    except Exception:
        report_tracing_failure("reading whether the attempt was cancelled")
        return False


def end_with_result(context: StepContext, span: TracedSpan, *, failed: bool = False) -> None:
    """End ``span`` as of now, but only once the attempt's result is committed or dropped.

    On an engine that reports it (``on_attempt_result``), the span is exported after
    the commit: a Worker killed before it exports none ("An attempt whose Worker died
    exports no span"), instead of a successful call that the retry runs again. A
    dropped result is marked with ``RESULT_DROPPED`` and, on a span not ``failed``
    already, status ``ERROR`` with the engine's error type. Elsewhere it ends now.
    """
    end_ns = time.time_ns()  # the span covers the attempt's work, not its commit

    def settle(result: AttemptResult) -> None:
        if result.dropped is not None:
            span.set_attributes({RESULT_DROPPED: str(result.dropped)})
            if not failed:
                span.set_error(result.error_type, result.detail)
        span.end(end_ns)

    try:
        deferred = on_attempt_result(context, settle)
    except Exception:
        report_tracing_failure("waiting for the attempt's result")
        deferred = False
    if not deferred:
        span.end(end_ns)
