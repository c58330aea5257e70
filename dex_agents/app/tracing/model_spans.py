"""``chat`` spans of ``RunModel`` and ``CompactContext`` attempts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from dex_agents.app.tracing.common import (
    captures_content,
    common_attributes,
    content_json,
    end_with_result,
    message_parts,
    renders_as_result,
    stopped_with_its_worker,
    text_message,
)
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    ModelCallMetadata,
    ToolCallsRequested,
)
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_outcomes import describe_tool_call_outcome
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.windowing import message_sequence_key
from dex_agents.ports.errors import RetryAfterError
from dex_agents.ports.session_schema import AGENT_TRACE_CONTEXT
from dex_agents.ports.step_contexts import StepContext
from dex_agents.ports.tracing import (
    AttributeValue,
    SessionTracer,
    SpanKind,
    report_tracing_failure,
)

if TYPE_CHECKING:
    from dex_agents.app.session import SessionRuntime


class ModelAttempt:
    """One ``RunModel`` or ``CompactContext`` attempt's ``chat`` span, emitted when it ends."""

    def __init__(self, context: StepContext, runtime: SessionRuntime, turn_id: str | None) -> None:
        self._context = context
        self._runtime = runtime
        self._turn_id = turn_id
        self.parent: str | None = None
        self._start_ns: int | None = None
        self._error: BaseException | None = None
        self._usage: AgentUsage | None = None
        self._metadata: ModelCallMetadata | None = None
        self._attributes: dict[str, AttributeValue] = {}
        self._output: list[dict[str, Any]] | None = None
        self._input: list[dict[str, Any]] | None = None

    @property
    def _content(self) -> bool:
        return captures_content(self._runtime)

    def started(
        self, messages: Sequence[AgentMessage], tool_calls: Mapping[str, AgentToolCall] = {}
    ) -> None:
        """The model call starts with ``messages`` (and the turn's recorded tool calls)."""
        if not self._runtime.tracing.tracer.enabled:
            return
        self._start_ns = time.time_ns()
        try:
            if messages:
                # Messages come in sequence order: the newest is the last.
                self._attributes["dex.agent.input_messages.last_key"] = message_sequence_key(
                    messages[-1].sequence
                )
            if self._content:
                items = [message_parts(message) for message in messages]
                # A runner that stores a call's message, or its result's, before the next
                # model call (the built-in loop does) has it among the messages already.
                stored_calls, stored_results = _stored_tool_messages(messages)
                for record in tool_calls.values():
                    key = (record.turn_id, record.tool_call_id)
                    call = {
                        "type": "tool_call",
                        "id": record.tool_call_id,
                        "name": record.tool_name,
                        "arguments": record.arguments,
                    }
                    if key not in stored_calls:
                        items.append({"role": "assistant", "parts": [call]})
                    if record.is_final and key not in stored_results:
                        # What the model reads: a rejected call has no output or error.
                        result = {
                            "type": "tool_call_response",
                            "id": record.tool_call_id,
                            "response": describe_tool_call_outcome(record),
                        }
                        items.append({"role": "tool", "parts": [result]})
                self._input = items
        except Exception:
            report_tracing_failure("annotating the chat span")

    def produced(self, outcome: AgentTurnOutcome, first_sequence: int) -> None:
        """The call returned ``outcome``; its new messages are stored from ``first_sequence``."""
        if self._start_ns is None:
            return
        self._usage = outcome.usage
        self._metadata = outcome.model_call_metadata
        try:
            # A completed turn also stores the turn's tool results; this call produced
            # only what follows the last of them.
            messages = list(outcome.new_messages)
            skipped = max(
                (index + 1 for index, item in enumerate(messages) if item.role is MessageRole.TOOL),
                default=0,
            )
            produced = messages[skipped:]
            if produced:
                self._attributes["dex.agent.output_messages.keys"] = [
                    message_sequence_key(first_sequence + skipped + index)
                    for index in range(len(produced))
                ]
            if isinstance(outcome, ToolCallsRequested) and outcome.tool_calls:
                self._attributes["dex.agent.requested_tool_call.ids"] = [
                    call.tool_call_id for call in outcome.tool_calls
                ]
            if self._content:
                parts: list[dict[str, Any]] = []
                for message in produced:
                    if message.text:
                        parts.append({"type": "text", "content": message.text})
                if isinstance(outcome, ToolCallsRequested):
                    parts.extend(
                        {
                            "type": "tool_call",
                            "id": call.tool_call_id,
                            "name": call.tool_name,
                            "arguments": call.arguments,
                        }
                        for call in outcome.tool_calls
                    )
                reason = "tool_call" if isinstance(outcome, ToolCallsRequested) else "stop"
                self._output = [
                    {
                        "role": "assistant",
                        "parts": parts,
                        "finish_reason": _finish_reason(outcome.model_call_metadata, reason),
                    }
                ]
        except Exception:
            report_tracing_failure("annotating the chat span")

    def summarized(
        self,
        summary: str,
        usage: AgentUsage,
        metadata: ModelCallMetadata | None,
    ) -> None:
        """A ``CompactContext`` call summarized its messages into ``summary``."""
        self._usage = usage
        self._metadata = metadata
        if self._content:
            message = text_message("assistant", summary)
            message["finish_reason"] = _finish_reason(metadata, "stop")
            self._output = [message]

    def failed(self, error: BaseException) -> None:
        """The attempt failed with ``error`` (its span gets status ``ERROR``).

        A ``RetryAfterError`` is recorded as its cause, the model call's own error.
        """
        self._error = error.cause if isinstance(error, RetryAfterError) else error

    def emit(self) -> None:
        """Emit the ``chat`` span, when a model call started."""
        tracer = self._runtime.tracing.tracer
        if self._start_ns is None or not tracer.enabled:
            return
        try:
            self._emit(tracer)
        except Exception:
            report_tracing_failure("emitting the chat span")

    def _emit(self, tracer: SessionTracer) -> None:
        version = self._runtime.options.tracing.semantic_conventions_version
        attributes = common_attributes(self._context, self._turn_id, "chat")
        attributes.update(self._attributes)
        metadata = self._metadata
        if metadata is not None:
            provider_key = "gen_ai.provider.name" if version.carries_content else "gen_ai.system"
            for key, value in (
                ("gen_ai.request.model", metadata.request_model),
                ("gen_ai.response.model", metadata.response_model),
                (provider_key, metadata.provider_name),
                ("gen_ai.response.id", metadata.response_id),
            ):
                if value is not None:
                    attributes[key] = value
            if metadata.finish_reasons is not None:
                attributes["gen_ai.response.finish_reasons"] = list(metadata.finish_reasons)
        usage = self._usage
        single = usage is None or usage.model_calls == 1
        if (
            usage is not None
            and usage.model_calls == 1
            and (usage.input_tokens or usage.output_tokens)
        ):
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            if version.carries_content:
                if usage.cached_input_tokens:
                    attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens
                if usage.reasoning_tokens:
                    attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
        if self._content:
            for key, content in (
                ("gen_ai.input.messages", self._input),
                ("gen_ai.output.messages", self._output),
            ):
                serialized = None if content is None else content_json(content)
                if serialized is not None:
                    attributes[key] = serialized
        request_model = None if metadata is None else metadata.request_model
        span = tracer.start_span(
            "chat" if request_model is None else f"chat {request_model}",
            kind=SpanKind.CLIENT if single else SpanKind.INTERNAL,
            attributes=attributes,
            parent=self.parent,
            start_time_ns=self._start_ns,
        )
        if self._error is not None:
            span.record_error(self._error)
        end_with_result(self._context, span, failed=self._error is not None)


def model_attempt(
    context: StepContext, runtime: SessionRuntime, turn_id: str | None
) -> contextlib.AbstractContextManager[ModelAttempt]:
    """Trace one model Step attempt: the activation's root is current while it runs.

    ``attempt.parent`` is the stored root even when this Worker's tracing is off:
    ``RunModel`` copies it onto the tool call records it creates, so tool Steps on
    a Worker with tracing still join the activation (the read is of the attempt's
    snapshot, not the store).
    """
    return _ModelAttemptScope(context, runtime, turn_id)


class _ModelAttemptScope:
    """``model_attempt``'s block. A class, not a ``contextlib.contextmanager``: that
    generator, and the tracer's ``current_parent`` as another, cost about 15 K instructions
    more an attempt, two a turn (``bench/turns-log.md``, the ninth pass).

    Its rule, as the generator had it: the root is current from the block's start until
    after the span is emitted; a block that ends by an exception records it and emits the
    span, unless the attempt stopped with its Worker (then no span: it runs again as the
    same attempt); the exception goes on either way.
    """

    __slots__ = ("_attempt", "_context", "_parent", "_runtime", "_turn_id")

    def __init__(self, context: StepContext, runtime: SessionRuntime, turn_id: str | None) -> None:
        self._context = context
        self._runtime = runtime
        self._turn_id = turn_id

    def __enter__(self) -> ModelAttempt:
        context = self._context
        runtime = self._runtime
        attempt = ModelAttempt(context, runtime, self._turn_id)
        tracer = runtime.tracing.tracer
        try:
            attempt.parent = context.state.get(AGENT_TRACE_CONTEXT)
        except Exception:
            report_tracing_failure("reading AgentTraceContext")
        parent = tracer.current_parent(attempt.parent)
        parent.__enter__()
        self._attempt = attempt
        self._parent = parent
        return attempt

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        parent = self._parent
        try:
            if error is None:
                self._attempt.emit()
            elif not stopped_with_its_worker(self._context, error):  # else no span: it runs again
                self._attempt.failed(error)
                self._attempt.emit()
        except BaseException as raised:
            # Raised while the root is current: its block ends with that, as a ``with`` would.
            if parent.__exit__(type(raised), raised, raised.__traceback__):
                return True
            raise
        return parent.__exit__(kind, error, traceback)


def _stored_tool_messages(
    messages: Sequence[AgentMessage],
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The (turn, tool call ID) of the calls and of the results the messages render."""
    calls: set[tuple[str, str]] = set()
    results: set[tuple[str, str]] = set()
    for message in messages:
        if message.tool_call_id is None:
            continue
        stored = results if renders_as_result(message) else calls
        stored.add((message.turn_id, message.tool_call_id))
    return calls, results


def _finish_reason(metadata: ModelCallMetadata | None, otherwise: str) -> str:
    # The GenAI output message requires one: the provider's when the runner reported it.
    reasons = None if metadata is None else metadata.finish_reasons
    return reasons[0] if reasons else otherwise
