"""The chat's three prompts: a message, an approval and a question's answer.

Each asks again until it has something to send, and returns ``None`` when the
person leaves (``/quit``, end of input), so leaving never decides anything.
Ctrl-C raises ``KeyboardInterrupt`` out of any of them, before anything is sent.
They read and write through a ``LineInput``, so what the session prints while one
waits shows above it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dex_agents.cli import terminal
from dex_agents.cli.commands import (
    LineKind,
    Prompt,
    TypedLine,
    approval_decision,
    help_lines,
    parse_line,
    unknown_command_text,
)
from dex_agents.cli.typed_lines import LineInput
from dex_agents.domain.builtin_tools import is_allowed_answer
from dex_agents.domain.interrupts import AgentInterrupt


def _say_discarded(lines: LineInput, what: str) -> None:
    """Drop the lines typed before a decision was asked, and say so when there were any.

    Read at an approval or a question, a line typed while the turn ran (the next message,
    say) would decide what its writer never saw: it would become the answer.
    """
    typed = lines.discard_typed_ahead()
    if typed.entered_line:
        # Its text is kept for the message prompt: typed again, it would be there twice.
        back = "it comes back at the message prompt after it"
        if typed.dropped:
            back += "; what was typed after it was not sent: type that again"
        lines.write(f"the line entered as this {what} showed was not sent; {back}\n")
    elif typed.dropped:
        lines.write(f"what was typed before this {what} showed was not sent; type it again\n")


async def _read(
    lines: LineInput, prompt_text: str, prompt: Prompt, *, until_typed: bool = False
) -> TypedLine | None:
    """The next line that is text or a decision; ``None`` to leave. Help and unknown
    commands are answered here, and the prompt is shown again."""
    while True:
        line = await lines.read_line(
            prompt_text, keep_partial=prompt is Prompt.MESSAGE, until_typed=until_typed
        )
        if line is None:
            return None
        typed = parse_line(line, prompt)
        if typed.kind is LineKind.LEAVE:
            return None
        if typed.kind is LineKind.HELP:
            lines.write("\n".join(help_lines(prompt)) + "\n")
        elif typed.kind is LineKind.UNKNOWN_COMMAND:
            lines.write(unknown_command_text(terminal.escaped(typed.text)) + "\n")
        elif typed.kind is LineKind.MISUSED_COMMAND:
            lines.write(typed.text + "\n")
        elif typed.kind is not LineKind.EMPTY or prompt is not Prompt.MESSAGE:
            return typed


async def ask_message(lines: LineInput, *, during_turn: bool = False) -> str | None:
    """The next user message; ``None`` to leave. Cancelled, it keeps what was typed for
    the next message prompt. ``during_turn``, the prompt shows below the running turn's
    text once something is typed at it."""
    typed = await _read(lines, terminal.USER_PROMPT, Prompt.MESSAGE, until_typed=during_turn)
    return None if typed is None else typed.text


async def ask_approval(lines: LineInput, interrupt: AgentInterrupt) -> bool | None:
    """``True`` to approve, ``False`` to reject; ``None`` to leave with it still pending."""
    _say_discarded(lines, "approval")
    while True:
        typed = await _read(lines, terminal.approval_prompt(interrupt), Prompt.APPROVAL)
        if typed is None:
            return None
        decision = approval_decision(typed.text)
        if decision is not None:
            return decision
        lines.write("answer y or n (or /quit to leave without deciding)\n")


@dataclass(frozen=True)
class QuestionReply:
    """An answer to a question, or ``declined`` to decline it."""

    answer: str = ""
    declined: bool = False


async def ask_answer(lines: LineInput, interrupt: AgentInterrupt) -> QuestionReply | None:
    """The answer to a pending question; ``None`` to leave with it still pending."""
    lines.write(f"agent asks: {terminal.escaped(interrupt.question or '', keep_newlines=True)}\n")
    if interrupt.choices:
        lines.write(f"choices: {', '.join(terminal.escaped(c) for c in interrupt.choices)}\n")
    _say_discarded(lines, "question")
    while True:
        typed = await _read(lines, terminal.QUESTION_PROMPT, Prompt.QUESTION)
        if typed is None:
            return None
        if typed.kind is LineKind.DECLINE:
            return QuestionReply(declined=True)
        if is_allowed_answer(
            typed.text, choices=interrupt.choices, allows_free_text=interrupt.allows_free_text
        ):
            return QuestionReply(answer=typed.text)
        lines.write(not_sent_text(interrupt, typed.text) + "\n")


def not_sent_text(interrupt: AgentInterrupt, answer: str) -> str:
    """Why the chat does not send ``answer`` to ``interrupt``, and what to type instead."""
    if not answer.strip():
        why = "an empty answer is not sent"
    else:
        why = "this question takes one of the choices: " + ", ".join(
            terminal.escaped(choice) for choice in interrupt.choices
        )
    return f"{why}; type an answer, /decline to decline the question, or /quit to leave"
