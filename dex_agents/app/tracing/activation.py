"""The activation's ``invoke_agent`` root and its ``AgentTraceContext``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.app.tracing.common import (
    agent_name,
    captures_content,
    common_attributes,
    content_json,
    end_with_result,
    text_message,
)
from dex_agents.ports.session_schema import AGENT_TRACE_CONTEXT
from dex_agents.ports.step_contexts import StepContext
from dex_agents.ports.tracing import (
    SpanKind,
    report_tracing_failure,
)

if TYPE_CHECKING:
    from dex_agents.app.session import SessionRuntime


def start_activation(
    context: StepContext,
    runtime: SessionRuntime,
    *,
    turn_id: str | None,
    trigger: str,
    user_message_key: str | None = None,
    user_text: str | None = None,
    interrupt_id: str | None = None,
    approved: bool | None = None,
) -> str | None:
    """Emit the activation's ``invoke_agent`` root and stage its ``AgentTraceContext``.

    Returns the root's ``traceparent``, or ``None`` (and stages the deletion of a
    stored one) when the root has no valid context.
    """
    state = context.state
    traceparent = None
    try:
        previous = state.get(AGENT_TRACE_CONTEXT)
    except Exception:
        report_tracing_failure("reading AgentTraceContext")
        return None
    tracer = runtime.tracing.tracer
    if tracer.enabled:
        try:
            agent = agent_name(runtime)
            attributes = common_attributes(context, turn_id, "invoke_agent")
            attributes["gen_ai.agent.name"] = agent
            attributes["dex.agent.activation.trigger"] = trigger
            if user_message_key is not None:
                attributes["dex.agent.user_message.key"] = user_message_key
            if interrupt_id is not None:
                attributes["dex.agent.interrupt.id"] = interrupt_id
            if approved is not None:
                attributes["dex.agent.interrupt.approved"] = approved
            if user_text is not None and captures_content(runtime):
                content = content_json([text_message("user", user_text)])
                if content is not None:
                    attributes["gen_ai.input.messages"] = content
            span = tracer.start_span(
                f"invoke_agent {agent}",
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                parent=None,
                links=() if previous is None else (previous,),
            )
            traceparent = span.traceparent()
            # Exported once AgentTraceContext, which names it, is committed with the Step.
            end_with_result(context, span)
        except Exception:
            report_tracing_failure("emitting the invoke_agent span")
            traceparent = None
    if traceparent is not None:
        state.set(AGENT_TRACE_CONTEXT, traceparent)
    elif previous is not None:
        state.delete(AGENT_TRACE_CONTEXT)
    return traceparent
