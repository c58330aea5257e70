"""Built-in tools: ``ask_user``, ``durable_wait`` and ``write_todos``.

Built-in tools are session features, so they work under every runner: a runner
offers the enabled definitions from ``BUILT_IN_TOOL_DEFINITIONS`` and ``RunModel``
routes their calls to the session's own Steps ("Built-in tools: questions and
durable waits"). This module holds their pure rules: which names are reserved,
how their arguments parse, and the exact texts the model sees.

Invalid arguments raise ``ToolExecutionError`` with the spec's message, which the
session records as ``failed`` at once: ``invalid <tool> arguments: <reason>`` for
``ask_user`` and ``durable_wait``, ``invalid todos: <reason>`` for ``write_todos``.
``null`` for an optional argument means the argument is absent, because
providers in strict-schema mode send it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import attrs

from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.plans import AgentTodo, TodoStatus


class BuiltInTool(StrEnum):
    """A built-in tool, enabled in ``AgentSessionOptions.built_in_tools``."""

    ASK_USER = "ask_user"
    DURABLE_WAIT = "durable_wait"
    WRITE_TODOS = "write_todos"


DEFAULT_MAX_DURABLE_WAIT = timedelta(days=365)
"""The default ``max_durable_wait``: the longest ``durable_wait`` a call may ask for."""

QUESTION_DECLINED_MESSAGE = "The user declined to answer."
"""What the model sees when ``resolve_interrupt(..., approved=False)`` declines a question."""

QUESTION_DEADLINE_PASSED_MESSAGE = "question deadline passed"
"""What the model sees when a question's ``interrupt_deadline`` passes unanswered."""


@attrs.frozen(kw_only=True)
class BuiltInToolDefinition:
    """The definition a runner offers its model for one built-in tool.

    ``parameters_schema`` is a JSON Schema object that strict-schema providers
    accept: every property is listed in ``required``, optional ones are nullable,
    and no other property is allowed. Treat it as read-only.
    """

    name: BuiltInTool = attrs.field(converter=BuiltInTool)
    description: str
    parameters_schema: Mapping[str, Any]


_TODO_STATUSES = [status.value for status in TodoStatus]
_BUILT_IN_TOOL_NAMES = frozenset(tool.value for tool in BuiltInTool)


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    # Strict-schema providers need every property required and no others allowed.
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _field(json_type: str | list[str], description: str, **extra: Any) -> dict[str, Any]:
    return {"type": json_type, "description": description, **extra}


def _definition(
    tool: BuiltInTool, description: str, schema: dict[str, Any]
) -> BuiltInToolDefinition:
    return BuiltInToolDefinition(name=tool, description=description, parameters_schema=schema)


BUILT_IN_TOOL_DEFINITIONS: Mapping[BuiltInTool, BuiltInToolDefinition] = MappingProxyType(
    {
        BuiltInTool.ASK_USER: _definition(
            BuiltInTool.ASK_USER,
            "Ask the user a question and wait for the answer. Use it when you cannot go on "
            "without information or a decision that only the user has. The turn pauses until "
            "the user answers, declines, or the question's deadline passes, and the answer "
            "comes back as this tool's result. Offer choices when the answer is one of a few "
            "options, and set allows_free_text to false to accept only those choices.",
            _object(
                question=_field("string", "The question to show the user."),
                choices=_field(
                    ["array", "null"],
                    "Answers the user can pick from, or null for none.",
                    items={"type": "string"},
                ),
                allows_free_text=_field(
                    ["boolean", "null"],
                    "Whether the user may answer with their own text instead of a choice. "
                    "Null means true. False needs choices.",
                ),
            ),
        ),
        BuiltInTool.DURABLE_WAIT: _definition(
            BuiltInTool.DURABLE_WAIT,
            "Wait for a number of seconds before going on, such as before checking again on "
            "something that takes time. The wait is durable: it holds no resources and "
            "survives restarts, so it may last from a second up to days. The result arrives "
            "when the wait ends. If the user steers or cancels the turn first, the wait is "
            "cancelled.",
            _object(
                duration_seconds=_field(
                    "integer",
                    "How long to wait, in whole seconds: at least 1, and at most the "
                    "session's maximum (365 days by default).",
                ),
                reason=_field("string", "What you are waiting for; the user sees it."),
            ),
        ),
        BuiltInTool.WRITE_TODOS: _definition(
            BuiltInTool.WRITE_TODOS,
            "Replace the session's plan with this list of tasks. Send the whole list every "
            "time: it replaces the plan, it is not merged. Each task has content, what to do, "
            "and a status: pending, in_progress, or completed. Keep the statuses current as "
            "you work: mark a task in_progress when you start it and completed when it is "
            "done. An empty list clears the plan. Call it at most once per response.",
            _object(
                todos=_field(
                    "array",
                    "Every task of the plan, in order.",
                    items=_object(
                        content=_field("string", "What the task does."),
                        status=_field("string", "Where the task stands.", enum=_TODO_STATUSES),
                    ),
                )
            ),
        ),
    }
)
"""Every built-in tool's definition by tool; a runner offers those in
``turn.enabled_built_in_tools``."""


def enabled_built_in_tool_definitions(
    enabled_built_in_tools: Collection[str],
) -> tuple[BuiltInToolDefinition, ...]:
    """The definitions of the enabled built-in tools, in ``BuiltInTool`` order."""
    definitions = BUILT_IN_TOOL_DEFINITIONS.items()
    return tuple(value for tool, value in definitions if tool in enabled_built_in_tools)


def enabled_built_in_tool(
    tool_name: str, enabled_built_in_tools: Collection[str]
) -> BuiltInTool | None:
    """The built-in tool that a call named ``tool_name`` invokes, or ``None``.

    An enabled name is reserved and routes to the built-in; a disabled one is an
    ordinary tool name, so its calls go to the runner's tools.
    """
    if tool_name in _BUILT_IN_TOOL_NAMES and tool_name in enabled_built_in_tools:
        return BuiltInTool(tool_name)
    return None


def is_reserved_tool_name(tool_name: str, enabled_built_in_tools: Collection[str]) -> bool:
    """Whether an enabled built-in tool reserves ``tool_name``."""
    return enabled_built_in_tool(tool_name, enabled_built_in_tools) is not None


def check_no_reserved_tool_names(
    tool_names: Iterable[str], enabled_built_in_tools: Collection[str]
) -> None:
    """Raise ``ValueError`` for the first of ``tool_names``, in order, that an enabled built-in reserves.

    The message is ``tool <name> uses the name of an enabled built-in tool``.
    """
    for name in tool_names:
        if is_reserved_tool_name(name, enabled_built_in_tools):
            raise ValueError(f"tool {name} uses the name of an enabled built-in tool")


@attrs.frozen(kw_only=True)
class AskUserArguments:
    """Parsed ``ask_user`` arguments: absent ``choices`` is ``()``, absent ``allows_free_text`` ``True``."""

    question: str
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True


@attrs.frozen(kw_only=True)
class DurableWaitArguments:
    """Parsed ``durable_wait`` arguments."""

    duration_seconds: int
    reason: str


class _InvalidArguments(Exception):
    """A reason that ``_failing_as`` puts after the spec's prefix."""


@contextmanager
def _failing_as(prefix: str) -> Iterator[None]:
    try:
        yield
    except _InvalidArguments as error:
        raise ToolExecutionError(f"{prefix}: {error}") from None


def _decode_object(
    arguments: str | Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            raise _InvalidArguments("arguments are not valid JSON") from None
    if not isinstance(arguments, Mapping):
        raise _InvalidArguments("arguments must be a JSON object")
    unknown = sorted(str(key) for key in arguments if key not in required + optional)
    if unknown:
        raise _InvalidArguments(f"unknown arguments: {', '.join(unknown)}")
    # null for an optional argument means absent (strict-schema providers send it).
    values = {key: value for key, value in arguments.items() if value is not None}
    for name in required:
        if name not in values:
            raise _InvalidArguments(f"{name} is required")
    return values


def _is_blank(value: object) -> bool:
    return not isinstance(value, str) or not value.strip()


def parse_ask_user_arguments(arguments: str | Mapping[str, Any]) -> AskUserArguments:
    """Parse ``ask_user`` ``{question, choices?, allows_free_text?}`` from JSON text or an object.

    ``question`` must be non-blank text. ``choices`` is a list of distinct non-blank
    texts; ``[]`` means no choices, like ``null``. ``allows_free_text`` is a boolean,
    ``True`` when absent; ``False`` needs choices, or no answer could be given.
    Raises ``ToolExecutionError`` ``invalid ask_user arguments: <reason>``.
    """
    with _failing_as(f"invalid {BuiltInTool.ASK_USER} arguments"):
        values = _decode_object(arguments, ("question",), ("choices", "allows_free_text"))
        question, choices = values["question"], values.get("choices", [])
        allows_free_text = values.get("allows_free_text", True)
        if _is_blank(question):
            raise _InvalidArguments("question must be a non-blank string")
        if not isinstance(choices, list):
            raise _InvalidArguments("choices must be a list of strings or null")
        if any(_is_blank(choice) for choice in choices):
            raise _InvalidArguments("every choice must be a non-blank string")
        if len(set(choices)) != len(choices):
            raise _InvalidArguments("choices must not repeat")
        if not isinstance(allows_free_text, bool):
            raise _InvalidArguments("allows_free_text must be a boolean or null")
        if not allows_free_text and not choices:
            raise _InvalidArguments("allows_free_text is false, so choices are required")
        return AskUserArguments(
            question=question, choices=tuple(choices), allows_free_text=allows_free_text
        )


def max_durable_wait_seconds(max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT) -> int:
    """The longest ``duration_seconds`` allowed: whole seconds of ``max_durable_wait``, rounded down."""
    return max_durable_wait // timedelta(seconds=1)


def parse_durable_wait_arguments(
    arguments: str | Mapping[str, Any],
    *,
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT,
) -> DurableWaitArguments:
    """Parse ``durable_wait`` ``{duration_seconds, reason}`` from JSON text or an object.

    ``duration_seconds`` is whole seconds from 1 to ``max_durable_wait`` (a float
    with no fraction, such as ``60.0``, counts as whole); ``reason`` is non-blank
    text. Raises ``ToolExecutionError`` ``invalid durable_wait arguments: <reason>``.
    """
    with _failing_as(f"invalid {BuiltInTool.DURABLE_WAIT} arguments"):
        values = _decode_object(arguments, ("duration_seconds", "reason"))
        duration, reason = values["duration_seconds"], values["reason"]
        if isinstance(duration, float) and math.isfinite(duration) and duration.is_integer():
            duration = int(duration)
        if isinstance(duration, bool) or not isinstance(duration, int):
            raise _InvalidArguments("duration_seconds must be a whole number of seconds")
        max_seconds = max_durable_wait_seconds(max_durable_wait)
        if not 1 <= duration <= max_seconds:
            raise _InvalidArguments(f"duration_seconds must be from 1 to {max_seconds}")
        if _is_blank(reason):
            raise _InvalidArguments("reason must be a non-blank string")
        return DurableWaitArguments(duration_seconds=duration, reason=reason)


def parse_write_todos_arguments(arguments: str | Mapping[str, Any]) -> tuple[AgentTodo, ...]:
    """Parse ``write_todos`` ``{todos: [{content, status}]}`` from JSON text or an object.

    Every task needs non-blank ``content`` and a ``status`` of ``pending``,
    ``in_progress`` or ``completed``; an empty list clears the plan. Raises
    ``ToolExecutionError`` ``invalid todos: <reason>``.
    """
    with _failing_as("invalid todos"):
        raw_todos = _decode_object(arguments, ("todos",))["todos"]
        if not isinstance(raw_todos, list):
            raise _InvalidArguments("todos must be a list")
        return tuple(_parse_todo(raw, f"todos[{index}]") for index, raw in enumerate(raw_todos))


def _parse_todo(raw: object, where: str) -> AgentTodo:
    if not isinstance(raw, Mapping):
        raise _InvalidArguments(f"{where} must be an object with content and status")
    unknown = sorted(str(key) for key in raw if key not in ("content", "status"))
    if unknown:
        raise _InvalidArguments(f"{where} has unknown keys: {', '.join(unknown)}")
    content, status = raw.get("content"), raw.get("status")
    if not isinstance(content, str) or not content.strip():
        raise _InvalidArguments(f"{where}.content must be a non-blank string")
    if status not in _TODO_STATUSES:
        raise _InvalidArguments(f"{where}.status must be one of {', '.join(_TODO_STATUSES)}")
    return AgentTodo(content=content, status=status)


def _compact_json(value: Mapping[str, Any]) -> str:
    # Insertion order, not sorted: the spec fixes the key order of these texts.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def ask_user_answer_output(answer: str) -> str:
    """The tool result the model sees for an answered ``ask_user`` call.

    ``{"status":"answered","answer":"<text>"}`` as compact JSON, non-ASCII unescaped.
    """
    return _compact_json({"status": "answered", "answer": answer})


def is_allowed_answer(answer: str, *, choices: Collection[str], allows_free_text: bool) -> bool:
    """Whether ``answer_question`` may accept ``answer`` for a question.

    A blank answer never is; without free text, only one of ``choices`` exactly is.
    """
    if not answer.strip():
        return False
    return allows_free_text or answer in choices


def durable_wait_until(now: datetime, duration_seconds: int) -> datetime:
    """The ``wait_until`` of a durable wait that starts at ``now``."""
    return now + timedelta(seconds=duration_seconds)


def timer_seconds_until(now: datetime, until: datetime) -> int:
    """The whole seconds a Timer waits from ``now`` until ``until``: rounded up, never negative."""
    remaining = until - now
    if remaining <= timedelta(0):
        return 0
    return -(-remaining // timedelta(seconds=1))


def durable_wait_output(waited_seconds: int, reason: str) -> str:
    """The tool result the model sees when a durable wait completes.

    ``{"status":"completed","waited_seconds":<n>,"reason":"<reason>"}`` as compact JSON.
    """
    return _compact_json(
        {"status": "completed", "waited_seconds": waited_seconds, "reason": reason}
    )
