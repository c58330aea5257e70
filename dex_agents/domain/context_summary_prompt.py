"""The texts of a summary request: its prompt, the summary note, and their fixed lines.

A framework adapter summarizes with ``build_context_summary_prompt`` as a call's
only input and ``CONTEXT_SUMMARY_INSTRUCTIONS``; the built-in loop sends the same
texts. ``build_context_summary_note`` is how a stored summary reaches the model.
"""

from __future__ import annotations

from dex_agents.domain.context_summary import ContextSummary, ContextSummaryRequest
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.token_estimates import UTF8_BYTES_PER_TOKEN, utf8_length

CONTEXT_SUMMARY_NOTE_HEADER = "[Dex] Summary of the earlier conversation:"
"""The first line of the model input that carries the context summary."""

CONTEXT_SUMMARY_TRANSCRIPT_HEADER = "[Dex] Transcript of the earlier conversation to summarize:"
"""The first line of ``build_context_summary_prompt``'s prompt."""

CONTEXT_SUMMARY_INSTRUCTIONS = (
    "[Dex] You are summarizing the earlier part of a conversation between a user and an AI"
    " agent, so that the agent can continue the conversation without the original messages."
    " If the transcript includes an earlier summary, fold it into the new one. Keep what the"
    " agent needs to continue: the user's goals, requests, preferences and constraints;"
    " decisions made and their reasons; facts learned and tool results, with exact names,"
    " identifiers, numbers, paths and URLs; the work done and the work still open; and any"
    " question still waiting for an answer. Leave out greetings and repetition. Write plain"
    " text in the conversation's language, as concisely as completeness allows, and do not"
    " address the user or call tools."
)
"""The instructions of a summary call; the built-in loop summarizes with them and no tools."""

_BLOCK_SEPARATOR = "\n\n"


def build_context_summary_omission_note(omitted_count: int) -> str:
    """``[Dex] <n> earlier messages did not fit in this request and are left out.``"""
    if isinstance(omitted_count, bool) or not isinstance(omitted_count, int) or omitted_count < 1:
        raise ValueError(f"omitted_count must be a positive int, not {omitted_count!r}")
    return f"[Dex] {omitted_count} earlier messages did not fit in this request and are left out."


def build_context_summary_note(summary: ContextSummary) -> str:
    """The model input text of a summary: ``CONTEXT_SUMMARY_NOTE_HEADER``, a newline, the text."""
    return f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{summary.text}"


def render_transcript_message(message: AgentMessage) -> str | None:
    """One message as a transcript block of ``build_context_summary_prompt``.

    Renders the provider-neutral projection (``text`` and the ``tool_*``
    fields), never the opaque ``framework_item``; ``None`` for a message with
    none, such as a reasoning item.
    """
    lines: list[str] = []
    if message.role is MessageRole.TOOL:
        name = message.tool_name or "a tool"
        output = message.tool_output if message.tool_output is not None else message.text
        if output is not None:
            lines.append(f"tool result of {name}: {output}")
    else:
        if message.text is not None:
            lines.append(f"{message.role}: {message.text}")
        if message.role is MessageRole.ASSISTANT and (
            message.tool_call_id is not None or message.tool_name is not None
        ):
            name = message.tool_name or "a tool"
            lines.append(f"assistant called {name}: {message.tool_arguments or '{}'}")
    if not lines:
        return None
    if message.images:
        lines.append(f"[{len(message.images)} image(s) not shown]")
    return "\n".join(lines)


def build_context_summary_prompt(request: ContextSummaryRequest) -> str:
    """The summary request as one plain text prompt that fits ``request.input_token_budget``.

    It starts with ``CONTEXT_SUMMARY_TRANSCRIPT_HEADER``, then the previous
    summary (after ``CONTEXT_SUMMARY_NOTE_HEADER``), then one block per message,
    and ends with ``CONTEXT_SUMMARY_INSTRUCTIONS``, so it works as a call's only
    input. When it would exceed the budget (``estimate_text_tokens``), the oldest
    messages are left out and ``build_context_summary_omission_note`` says how
    many; if even the header, previous summary, and instructions exceed it, every
    message is left out.
    """
    head = [CONTEXT_SUMMARY_TRANSCRIPT_HEADER]
    if request.previous_summary is not None:
        head.append(build_context_summary_note(request.previous_summary))
    tail = [CONTEXT_SUMMARY_INSTRUCTIONS]
    blocks = [render_transcript_message(message) for message in request.messages]
    max_bytes = max(request.input_token_budget, 0) * UTF8_BYTES_PER_TOKEN
    separator = utf8_length(_BLOCK_SEPARATOR)
    fixed = sum(utf8_length(part) + separator for part in head) + utf8_length(tail[0])
    suffix = [0] * (len(blocks) + 1)
    for position in range(len(blocks) - 1, -1, -1):
        block = blocks[position]
        suffix[position] = suffix[position + 1] + (
            0 if block is None else utf8_length(block) + separator
        )
    omitted = len(blocks)
    for count in range(len(blocks) + 1):
        note = utf8_length(build_context_summary_omission_note(count)) + separator if count else 0
        if fixed + note + suffix[count] <= max_bytes:
            omitted = count
            break
    parts = [*head]
    if omitted:
        parts.append(build_context_summary_omission_note(omitted))
    parts.extend(block for block in blocks[omitted:] if block is not None)
    parts.extend(tail)
    return _BLOCK_SEPARATOR.join(parts)
