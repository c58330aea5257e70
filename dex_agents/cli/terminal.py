"""How ``dex-agents`` renders sessions as plain text lines.

Every line says who speaks with one prefix style: ``you>``, ``agent>`` and
``tool>``. Text that other programs or a model wrote (session IDs, Flow types,
messages, tool output) goes through ``escaped`` first, so it cannot move the
cursor, recolour or reorder what the terminal shows.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

from dex_agents.domain.attention import last_turn_cancelled, last_turn_failed
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.plans import AgentPlan, executed_plan_revision
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.usage import AgentUsage

USER_PROMPT = "you> "
"""The prompt of ``dex-agents chat`` for the next user message."""

QUESTION_PROMPT = "question> "
"""The prompt of ``dex-agents chat`` for the answer to an ``ask_user`` question."""

# Bidirectional controls are format characters, not control characters, but they
# reorder the rest of a line, so a column of IDs could show one ID as another.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def _escape(character: str) -> str:
    code = ord(character)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escaped(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with control characters, bidirectional controls and lone surrogates escaped.

    They are written as Python escapes (``\\x1b``, ``\\u202e``). ``keep_newlines``
    keeps line feeds and tabs, for multi-line text such as a model's answer; a
    carriage return is always escaped, since it would overwrite the line.
    """
    if text.isprintable():
        return text
    shown: list[str] = []
    for character in text:
        if keep_newlines and character in "\n\t":
            shown.append(character)
        elif unicodedata.category(character) in ("Cc", "Cs") or character in _BIDI_CONTROLS:
            shown.append(_escape(character))
        else:
            shown.append(character)
    return "".join(shown)


def _text(text: str | None) -> str:
    return escaped(text or "", keep_newlines=True)


def approval_prompt(interrupt: AgentInterrupt) -> str:
    """``approve <tool> <arguments>? [y/n] ``: the question for a pending approval."""
    return f"approve {escaped(interrupt.tool_name)} {escaped(interrupt.arguments)}? [y/n] "


def agent_text_line(text: str) -> str:
    """The model's text, as ``agent> <text>``."""
    return f"agent> {_text(text)}"


def tool_request_line(message: AgentMessage) -> str:
    """``agent> calls <tool> <arguments>``: a tool call the model asked for."""
    arguments = escaped(message.tool_arguments or "{}")
    return f"agent> calls {escaped(message.tool_name or '')} {arguments}"


def tool_status_line(call: AgentToolCall, *, with_arguments: bool = False) -> str:
    """``tool> <tool> -> <status>``, with its output, error or rejection once it has one."""
    name = escaped(call.tool_name)
    if with_arguments:
        name += f" {escaped(call.arguments)}"
    line = f"tool> {name} -> {call.status}"
    if call.error:
        line += f": {_text(call.error)}"
    elif call.rejection_message:
        line += f": {_text(call.rejection_message)}"
    elif call.output is not None and call.status.is_final:
        line += f": {_text(call.output)}"
    return line


def tool_result_line(message: AgentMessage, status: ToolCallStatus | None = None) -> str:
    """``tool> <tool> -> <output>``: a stored tool result, as the model read it; with the
    call's final ``status`` when it is known, ``tool> <tool> -> <status>: <output>``."""
    shown = (
        _text(message.tool_output) if status is None else f"{status}: {_text(message.tool_output)}"
    )
    return f"tool> {escaped(message.tool_name or '')} -> {shown}"


def plan_approved_line(revision: int, *, elsewhere: bool = False) -> str:
    """``plan revision <n> approved; the agent executes it``: the user message the session
    wrote for a plan's approval, shown as what it is rather than as a person's words;
    ``elsewhere`` when another window than the chat approved it."""
    where = " elsewhere" if elsewhere else ""
    return f"plan revision {revision} approved{where}; the agent executes it"


def message_lines(message: AgentMessage) -> list[str]:
    """The transcript lines of one stored message."""
    if message.role == MessageRole.USER:
        revision = executed_plan_revision(message.text or "")
        if revision is not None:
            return [plan_approved_line(revision)]
        return [f"{USER_PROMPT}{_text(message.text)}"]
    if message.role == MessageRole.ASSISTANT:
        lines = [agent_text_line(message.text)] if message.text else []
        if message.tool_name:
            lines.append(tool_request_line(message))
        return lines
    return [tool_result_line(message)]


def interrupt_text(interrupt: AgentInterrupt) -> str:
    """One pending interrupt: ``approval of <tool> <arguments>`` or ``an answer to <question>``."""
    if interrupt.kind == InterruptKind.QUESTION:
        return f"an answer to {escaped(repr(interrupt.question or interrupt.tool_name))}"
    return f"{interrupt.kind} of {escaped(interrupt.tool_name)} {escaped(interrupt.arguments)}"


def waits_for(snapshot: AgentSnapshot) -> str:
    """What a session waits for: its pending interrupts, else a user message or its turn."""
    if snapshot.pending_interrupts:
        return ", ".join(interrupt_text(item) for item in snapshot.pending_interrupts)
    if snapshot.state is None or snapshot.state.active_turn_id is None:
        return "a user message"
    return "its running turn"


def plan_lines(plan: AgentPlan | None) -> list[str]:
    """The plan, one line per task, or ``plan: none``."""
    if plan is None:
        return ["plan: none"]
    lines = [f"plan (revision {plan.revision}, {plan.status}):"]
    lines.extend(f"  [{todo.status}] {escaped(todo.content)}" for todo in plan.todos)
    return lines


def usage_line(usage: AgentUsage) -> str:
    """The session's model usage in one line."""
    return (
        f"usage: {usage.model_calls} model calls, {usage.input_tokens} input tokens, "
        f"{usage.output_tokens} output tokens"
    )


def running_turn_lines(calls: Sequence[AgentToolCall]) -> list[str]:
    """The tool calls of the running turn with their statuses, indented, or ``none``."""
    if not calls:
        return ["  none"]
    return [f"  {tool_status_line(call, with_arguments=True)}" for call in calls]


def last_exchange(messages: Sequence[AgentMessage]) -> list[AgentMessage]:
    """The last user message and everything stored after it: the agent's reply and tool calls."""
    last_user = max(
        (index for index, message in enumerate(messages) if message.role == MessageRole.USER),
        default=0,
    )
    return list(messages[last_user:])


def resume_lines(snapshot: AgentSnapshot) -> list[str]:
    """What ``dex-agents chat`` prints when it resumes a session: the last exchange, the
    running turn's tool calls (a write that already ran shows as ``succeeded``), how the
    last turn ended when it failed or was cancelled, and what the session waits for."""
    exchange = last_exchange(snapshot.messages)
    lines = ["last exchange:"] if exchange else ["no messages yet"]
    for message in exchange:
        lines.extend(f"  {line}" for line in message_lines(message))
    if snapshot.tool_calls:
        lines.append("tool calls of the running turn:")
        lines.extend(running_turn_lines(snapshot.tool_calls))
    lines.extend(_end_lines(snapshot))
    lines.append(f"waiting for: {waits_for(snapshot)}")
    return lines


def _end_lines(snapshot: AgentSnapshot) -> list[str]:
    """Why the last turn failed, or that it was cancelled, when no turn runs now."""
    state = snapshot.state
    if state is None or state.active_turn_id is not None:
        return []
    if last_turn_failed(state):
        return [f"the last turn failed: {_text(state.last_turn_error)}"]
    return ["the last turn was cancelled"] if last_turn_cancelled(state) else []


def show_lines(
    session_id: str,
    flow_type: str,
    snapshot: AgentSnapshot,
    messages: Iterable[AgentMessage],
    *,
    deleted_before: int | None = None,
) -> list[str]:
    """``dex-agents show``: the transcript, the tool calls, the plan and the usage.

    ``deleted_before`` is the sequence below which retention deleted the messages:
    the transcript says so, rather than look like the session's whole history.
    """
    status = "not started" if snapshot.state is None else str(snapshot.state.status)
    lines = [
        f"session {escaped(session_id)} ({escaped(flow_type)}): {status}, "
        f"waits for {waits_for(snapshot)}",
        "transcript:",
    ]
    if deleted_before is not None and deleted_before > 1:
        lines.append(f"  (messages 1 to {deleted_before - 1} were deleted by retention)")
    for message in messages:
        lines.extend(f"  {line}" for line in message_lines(message))
    lines.extend(_end_lines(snapshot))
    lines.append("tool calls of the running turn:")
    lines.extend(running_turn_lines(snapshot.tool_calls))
    lines.extend(plan_lines(snapshot.plan))
    lines.append(usage_line(snapshot.usage))
    return lines
