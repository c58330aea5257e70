"""The chat's three prompts: a message, an approval and a question's answer.

Each asks again until it has something to send, and returns ``None`` when the
person leaves (``/quit``, end of input), so leaving never decides anything.
Ctrl-C raises ``KeyboardInterrupt`` out of any of them, before anything is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import struct
import sys
import threading
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
from dex_agents.domain.builtin_tools import is_allowed_answer
from dex_agents.domain.interrupts import AgentInterrupt


async def read_line(prompt: str) -> str | None:
    """Print ``prompt`` and read one line from stdin; ``None`` at end of input."""
    print(prompt, end="", flush=True)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def deliver(line: str | OSError) -> None:
        if future.done():
            return
        if isinstance(line, OSError):
            future.set_exception(line)
        else:
            future.set_result(line)

    def read() -> None:
        # Bytes that are not text in the terminal's encoding become U+FFFD: with the
        # default handlers they either ended the chat (a lone surrogate the session
        # refuses) or killed this thread and left the chat waiting for ever.
        if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors != "replace":
            sys.stdin.reconfigure(errors="replace")
        result: str | OSError
        try:
            result = sys.stdin.readline()
        except OSError as error:  # the terminal went away: the chat ends with one line
            result = error
        # The loop may be gone after Ctrl-C; the line is not needed then.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(deliver, result)

    # A daemon thread, not the loop's executor, so Ctrl-C does not wait for Enter.
    threading.Thread(target=read, name="dex-agents-stdin", daemon=True).start()
    line = await future
    if not line:
        print(flush=True)
        return None
    return line.rstrip("\r\n")


def discard_typed_ahead() -> bool:
    """Drop the lines typed at a terminal before a decision was asked; whether there were any.

    Read at an approval or a question, a line typed while the turn ran (the next message,
    say) would decide what its writer never saw: it would become the answer.
    """
    try:
        import fcntl  # POSIX only, as a terminal's input queue is
        import termios

        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return False
        waiting = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if waiting <= 0:
            return False
        termios.tcflush(fd, termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        return False
    return True


def _say_discarded(what: str) -> None:
    if discard_typed_ahead():
        print(f"what was typed before this {what} showed was not sent; type it again", flush=True)


async def _read(prompt_text: str, prompt: Prompt) -> TypedLine | None:
    """The next line that is text or a decision; ``None`` to leave. Help and unknown
    commands are answered here, and the prompt is shown again."""
    while True:
        line = await read_line(prompt_text)
        if line is None:
            return None
        typed = parse_line(line, prompt)
        if typed.kind is LineKind.LEAVE:
            return None
        if typed.kind is LineKind.HELP:
            print("\n".join(help_lines(prompt)), flush=True)
        elif typed.kind is LineKind.UNKNOWN_COMMAND:
            print(unknown_command_text(terminal.escaped(typed.text)), flush=True)
        elif typed.kind is LineKind.MISUSED_COMMAND:
            print(typed.text, flush=True)
        elif typed.kind is not LineKind.EMPTY or prompt is not Prompt.MESSAGE:
            return typed


async def ask_message() -> str | None:
    """The next user message; ``None`` to leave."""
    typed = await _read(terminal.USER_PROMPT, Prompt.MESSAGE)
    return None if typed is None else typed.text


async def ask_approval(interrupt: AgentInterrupt) -> bool | None:
    """``True`` to approve, ``False`` to reject; ``None`` to leave with it still pending."""
    _say_discarded("approval")
    while True:
        typed = await _read(terminal.approval_prompt(interrupt), Prompt.APPROVAL)
        if typed is None:
            return None
        decision = approval_decision(typed.text)
        if decision is not None:
            return decision
        print("answer y or n (or /quit to leave without deciding)", flush=True)


@dataclass(frozen=True)
class QuestionReply:
    """An answer to a question, or ``declined`` to decline it."""

    answer: str = ""
    declined: bool = False


async def ask_answer(interrupt: AgentInterrupt) -> QuestionReply | None:
    """The answer to a pending question; ``None`` to leave with it still pending."""
    print(f"agent asks: {terminal.escaped(interrupt.question or '', keep_newlines=True)}")
    if interrupt.choices:
        print(f"choices: {', '.join(terminal.escaped(c) for c in interrupt.choices)}")
    _say_discarded("question")
    while True:
        typed = await _read(terminal.QUESTION_PROMPT, Prompt.QUESTION)
        if typed is None:
            return None
        if typed.kind is LineKind.DECLINE:
            return QuestionReply(declined=True)
        if is_allowed_answer(
            typed.text, choices=interrupt.choices, allows_free_text=interrupt.allows_free_text
        ):
            return QuestionReply(answer=typed.text)
        print(not_sent_text(interrupt, typed.text), flush=True)


def not_sent_text(interrupt: AgentInterrupt, answer: str) -> str:
    """Why the chat does not send ``answer`` to ``interrupt``, and what to type instead."""
    if not answer.strip():
        why = "an empty answer is not sent"
    else:
        why = "this question takes one of the choices: " + ", ".join(
            terminal.escaped(choice) for choice in interrupt.choices
        )
    return f"{why}; type an answer, /decline to decline the question, or /quit to leave"
