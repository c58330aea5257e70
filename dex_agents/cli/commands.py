"""What a line typed into ``dex-agents chat`` means, at each of its three prompts.

A line is a command or text. ``/quit`` (and ``quit`` or ``exit`` typed alone)
leaves and ``/help`` (and ``help`` alone) lists the commands, at every prompt, so
a person can always leave without deciding anything. Any other line that starts
with ``/`` is a command too: an unknown one is reported, never sent to the model;
``//`` sends a line that starts with ``/``. Bare words are commands only when
they are typed alone, so ``quit smoking`` is a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Prompt(StrEnum):
    """Where the chat reads a line."""

    MESSAGE = "message"
    """The next user message (``you>``)."""
    APPROVAL = "approval"
    """A pending approval (``approve ...? [y/n]``)."""
    QUESTION = "question"
    """A pending question (``question>``)."""


class LineKind(StrEnum):
    """What a typed line asks for."""

    LEAVE = "leave"
    HELP = "help"
    DECLINE = "decline"
    UNKNOWN_COMMAND = "unknown_command"
    MISUSED_COMMAND = "misused_command"
    """A known command typed with words after it; ``text`` says how to type it."""
    EMPTY = "empty"
    TEXT = "text"


@dataclass(frozen=True)
class TypedLine:
    """A parsed line: its kind, and the text to use (the text, or the unknown command)."""

    kind: LineKind
    text: str = ""


_LEAVE = frozenset({"/quit", "/exit", "quit", "exit"})
_HELP = frozenset({"/help", "help"})
_DECLINE = "/decline"


def parse_line(line: str, prompt: Prompt) -> TypedLine:
    """What ``line`` (without its line break) means at ``prompt``."""
    stripped = line.strip()
    word = stripped.lower()
    if not stripped:
        return TypedLine(LineKind.EMPTY)
    if word in _LEAVE:
        return TypedLine(LineKind.LEAVE)
    if word in _HELP:
        return TypedLine(LineKind.HELP)
    if stripped.startswith("//"):
        return TypedLine(LineKind.TEXT, stripped[1:])
    if stripped.startswith("/"):
        if prompt is Prompt.QUESTION and word == _DECLINE:
            return TypedLine(LineKind.DECLINE)
        command = stripped.split()[0]
        known = command.lower()
        # Called unknown, a known command with words after it read as a typo of its name.
        if known == _DECLINE and prompt is Prompt.QUESTION:
            return TypedLine(
                LineKind.MISUSED_COMMAND,
                f"{_DECLINE} takes no reason; type {_DECLINE} alone to decline the question",
            )
        if known in _LEAVE | _HELP:
            return TypedLine(
                LineKind.MISUSED_COMMAND, f"{known} takes no arguments; type {known} alone"
            )
        return TypedLine(LineKind.UNKNOWN_COMMAND, command)
    return TypedLine(LineKind.TEXT, stripped)


def approval_decision(text: str) -> bool | None:
    """``True`` for y or yes, ``False`` for n or no (any case), ``None`` for anything else."""
    word = text.strip().lower()
    if word in ("y", "yes"):
        return True
    if word in ("n", "no"):
        return False
    return None


def unknown_command_text(command: str) -> str:
    """What the chat says about a ``/command`` it does not know."""
    return f"unknown command {command}; /help lists the commands"


def help_lines(prompt: Prompt) -> list[str]:
    """The commands, as ``/help`` lists them at ``prompt``."""
    lines = [
        "commands (at every prompt):",
        "  /help       this list (help typed alone too)",
        "  /quit       leave, deciding nothing; quit or exit typed alone, Ctrl-D and",
        "              Ctrl-C leave too. The session stays in the database and the",
        "              same dex-agents chat command resumes it.",
        "  //text      send text that starts with /",
    ]
    if prompt is Prompt.APPROVAL:
        lines.append("at this approval: y or yes approves, n or no rejects")
    elif prompt is Prompt.QUESTION:
        lines.append("at this question: type the answer, or /decline to decline it")
    else:
        lines += [
            "anything else is a message to the agent; try 'where is order 7',",
            "'refund order 7', 'change the address of order 7' or 'make a plan'",
        ]
    return lines
