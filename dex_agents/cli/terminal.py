"""How ``dex-agents`` renders sessions as plain text lines."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.plans import AgentPlan
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.usage import AgentUsage

USER_PROMPT = "you> "
"""The prompt of ``dex-agents chat`` for the next user message."""

QUESTION_PROMPT = "question> "
"""The prompt of ``dex-agents chat`` for the answer to an ``ask_user`` question."""


def approval_prompt(interrupt: AgentInterrupt) -> str:
    """``approve <tool> <arguments>? [y/N] ``: the question for a pending approval."""
    return f"approve {interrupt.tool_name} {interrupt.arguments}? [y/N] "


def tool_call_line(call: AgentToolCall) -> str:
    """One tool call with its status, and its output or error once it has one."""
    line = f"[tool] {call.tool_name} {call.arguments} -> {call.status}"
    if call.error:
        line += f": {call.error}"
    elif call.rejection_message:
        line += f": {call.rejection_message}"
    elif call.output is not None and call.status.is_final:
        line += f": {call.output}"
    return line


def message_lines(message: AgentMessage) -> list[str]:
    """The transcript lines of one stored message."""
    if message.role == MessageRole.USER:
        return [f"you> {message.text or ''}"]
    if message.role == MessageRole.ASSISTANT:
        lines = [f"agent> {message.text}"] if message.text else []
        if message.tool_name:
            lines.append(f"agent calls {message.tool_name} {message.tool_arguments or '{}'}")
        return lines
    return [f"tool {message.tool_name or ''} -> {message.tool_output or ''}"]


def waits_for(snapshot: AgentSnapshot) -> str:
    """What a session waits for: its pending interrupts, else a user message or its turn."""
    if snapshot.pending_interrupts:
        return ", ".join(_interrupt_text(item) for item in snapshot.pending_interrupts)
    if snapshot.state is None or snapshot.state.active_turn_id is None:
        return "a user message"
    return "its running turn"


def _interrupt_text(interrupt: AgentInterrupt) -> str:
    if interrupt.kind == InterruptKind.QUESTION:
        return f"an answer to {interrupt.question or interrupt.tool_name!r}"
    return f"{interrupt.kind} of {interrupt.tool_name}"


def plan_lines(plan: AgentPlan | None) -> list[str]:
    """The plan, one line per task, or ``plan: none``."""
    if plan is None:
        return ["plan: none"]
    lines = [f"plan (revision {plan.revision}, {plan.status}):"]
    lines.extend(f"  [{todo.status}] {todo.content}" for todo in plan.todos)
    return lines


def usage_line(usage: AgentUsage) -> str:
    """The session's model usage in one line."""
    return (
        f"usage: {usage.model_calls} model calls, {usage.input_tokens} input tokens, "
        f"{usage.output_tokens} output tokens"
    )


def session_lines(session_id: str, snapshot: AgentSnapshot) -> list[str]:
    """``dex-agents sessions``: one line per session, with its state and what it waits for."""
    status = "not started" if snapshot.state is None else str(snapshot.state.status)
    return [f"{session_id}  {status}  waits for {waits_for(snapshot)}"]


def show_lines(
    session_id: str, snapshot: AgentSnapshot, messages: Iterable[AgentMessage]
) -> list[str]:
    """``dex-agents show``: the transcript, the tool calls, the plan and the usage."""
    status = "not started" if snapshot.state is None else str(snapshot.state.status)
    lines = [f"session {session_id}: {status}, waits for {waits_for(snapshot)}", "transcript:"]
    for message in messages:
        lines.extend(f"  {line}" for line in message_lines(message))
    lines.append("tool calls of the running turn:")
    calls: Sequence[AgentToolCall] = snapshot.tool_calls
    lines.extend(f"  {tool_call_line(call)}" for call in calls)
    if not calls:
        lines.append("  none")
    lines.extend(plan_lines(snapshot.plan))
    lines.append(usage_line(snapshot.usage))
    return lines
