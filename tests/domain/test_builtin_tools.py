"""Built-in tools: definitions, reserved names, argument parsing and the texts the model sees."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.builtin_tools import (
    BUILT_IN_TOOL_DEFINITIONS,
    DEFAULT_MAX_DURABLE_WAIT,
    QUESTION_DEADLINE_PASSED_MESSAGE,
    QUESTION_DECLINED_MESSAGE,
    AskUserArguments,
    BuiltInTool,
    BuiltInToolDefinition,
    DurableWaitArguments,
    ask_user_answer_output,
    check_no_reserved_tool_names,
    durable_wait_output,
    durable_wait_until,
    enabled_built_in_tool,
    enabled_built_in_tool_definitions,
    is_allowed_answer,
    is_reserved_tool_name,
    max_durable_wait_seconds,
    parse_ask_user_arguments,
    parse_durable_wait_arguments,
    parse_write_todos_arguments,
    timer_seconds_until,
)
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.plans import AgentTodo, TodoStatus
from dex_agents.domain.wire import from_json, to_json

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
ALL = frozenset(BuiltInTool)


@pytest.mark.parametrize(
    ("tool", "value"),
    [
        (BuiltInTool.ASK_USER, "ask_user"),
        (BuiltInTool.DURABLE_WAIT, "durable_wait"),
        (BuiltInTool.WRITE_TODOS, "write_todos"),
    ],
)
def test_built_in_tool_values(tool: BuiltInTool, value: str) -> None:
    assert tool == value
    assert str(tool) == value


def test_constants() -> None:
    assert timedelta(days=365) == DEFAULT_MAX_DURABLE_WAIT
    assert max_durable_wait_seconds() == 31_536_000
    assert QUESTION_DECLINED_MESSAGE == "The user declined to answer."
    assert QUESTION_DEADLINE_PASSED_MESSAGE == "question deadline passed"


# --- definitions -------------------------------------------------------------------


def _walk_objects(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_walk_objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_walk_objects(value))
    return found


def test_every_tool_has_a_definition_keyed_by_its_name() -> None:
    assert list(BUILT_IN_TOOL_DEFINITIONS) == list(BuiltInTool)
    for tool, definition in BUILT_IN_TOOL_DEFINITIONS.items():
        assert definition.name is tool
        assert definition.description.strip()


@pytest.mark.parametrize("tool", list(BuiltInTool))
def test_schemas_are_strict_mode_friendly(tool: BuiltInTool) -> None:
    schema = BUILT_IN_TOOL_DEFINITIONS[tool].parameters_schema
    json.dumps(schema)  # plain JSON a provider SDK can send
    objects = _walk_objects(schema)
    assert objects
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])


@pytest.mark.parametrize(
    ("tool", "properties"),
    [
        (BuiltInTool.ASK_USER, ["question", "choices", "allows_free_text"]),
        (BuiltInTool.DURABLE_WAIT, ["duration_seconds", "reason"]),
        (BuiltInTool.WRITE_TODOS, ["todos"]),
    ],
)
def test_schema_properties(tool: BuiltInTool, properties: list[str]) -> None:
    assert list(BUILT_IN_TOOL_DEFINITIONS[tool].parameters_schema["properties"]) == properties


def test_optional_ask_user_arguments_are_nullable() -> None:
    props = BUILT_IN_TOOL_DEFINITIONS[BuiltInTool.ASK_USER].parameters_schema["properties"]
    assert props["question"]["type"] == "string"
    assert props["choices"]["type"] == ["array", "null"]
    assert props["allows_free_text"]["type"] == ["boolean", "null"]


def test_write_todos_status_enum() -> None:
    schema = BUILT_IN_TOOL_DEFINITIONS[BuiltInTool.WRITE_TODOS].parameters_schema
    item = schema["properties"]["todos"]["items"]
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]


@pytest.mark.parametrize(
    ("enabled", "names"),
    [
        (frozenset(), []),
        (frozenset({BuiltInTool.WRITE_TODOS}), ["write_todos"]),
        (frozenset({"durable_wait", "ask_user"}), ["ask_user", "durable_wait"]),
        (ALL, ["ask_user", "durable_wait", "write_todos"]),
    ],
)
def test_enabled_definitions_follow_the_enabled_set(
    enabled: frozenset[str], names: list[str]
) -> None:
    assert [d.name for d in enabled_built_in_tool_definitions(enabled)] == names


def test_a_definition_round_trips_through_the_wire() -> None:
    definition = BUILT_IN_TOOL_DEFINITIONS[BuiltInTool.WRITE_TODOS]
    assert from_json(to_json(definition), BuiltInToolDefinition) == definition


# --- reserved names ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "enabled", "expected"),
    [
        ("ask_user", frozenset({BuiltInTool.ASK_USER}), BuiltInTool.ASK_USER),
        ("ask_user", frozenset({BuiltInTool.DURABLE_WAIT}), None),
        ("durable_wait", ALL, BuiltInTool.DURABLE_WAIT),
        ("write_todos", frozenset({"write_todos"}), BuiltInTool.WRITE_TODOS),
        ("write_todos", frozenset(), None),
        ("lookup_order", ALL, None),
        ("lookup_order", frozenset({"lookup_order"}), None),
        ("ASK_USER", ALL, None),
    ],
)
def test_an_enabled_name_is_reserved_and_a_disabled_one_is_ordinary(
    name: str, enabled: frozenset[str], expected: BuiltInTool | None
) -> None:
    assert enabled_built_in_tool(name, enabled) is expected
    assert is_reserved_tool_name(name, enabled) is (expected is not None)


@pytest.mark.parametrize(
    ("names", "enabled", "message"),
    [
        (["ask_user", "lookup"], frozenset({BuiltInTool.DURABLE_WAIT}), None),
        ([], ALL, None),
        (
            ["write_todos", "lookup", "ask_user"],
            ALL,
            "tool write_todos uses the name of an enabled built-in tool",
        ),
        (
            ["lookup", "ask_user", "write_todos"],
            ALL,
            "tool ask_user uses the name of an enabled built-in tool",
        ),
        (
            ["write_todos", "durable_wait"],
            frozenset({"durable_wait"}),
            "tool durable_wait uses the name of an enabled built-in tool",
        ),
    ],
)
def test_reserved_tool_names_are_refused_with_the_first_clash(
    names: list[str], enabled: frozenset[str], message: str | None
) -> None:
    if message is None:
        check_no_reserved_tool_names(names, enabled)
        return
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_no_reserved_tool_names(iter(names), enabled)


def test_the_durable_wait_limit_is_the_sessions_maximum() -> None:
    schema = BUILT_IN_TOOL_DEFINITIONS[BuiltInTool.DURABLE_WAIT].parameters_schema
    description = schema["properties"]["duration_seconds"]["description"]
    assert description == (
        "How long to wait, in whole seconds: at least 1, and at most the session's maximum"
        " (365 days by default)."
    )


# --- ask_user ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"question":"Which plan?"}', AskUserArguments(question="Which plan?")),
        (
            '{"question":"Which plan?","choices":null,"allows_free_text":null}',
            AskUserArguments(question="Which plan?"),
        ),
        (
            '{"question":"Which plan?","choices":[],"allows_free_text":true}',
            AskUserArguments(question="Which plan?"),
        ),
        (
            '{"question":"Size?","choices":["S","M"],"allows_free_text":false}',
            AskUserArguments(question="Size?", choices=("S", "M"), allows_free_text=False),
        ),
        (
            '{"question":"Size?","choices":["S","M"]}',
            AskUserArguments(question="Size?", choices=("S", "M"), allows_free_text=True),
        ),
        ({"question": "Grüße?"}, AskUserArguments(question="Grüße?")),
    ],
)
def test_ask_user_arguments_parse(arguments: Any, expected: AskUserArguments) -> None:
    assert parse_ask_user_arguments(arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("not json", "arguments are not valid JSON"),
        ("", "arguments are not valid JSON"),
        ('["Which?"]', "arguments must be a JSON object"),
        ('"Which?"', "arguments must be a JSON object"),
        ("{}", "question is required"),
        ('{"question":null}', "question is required"),
        ('{"question":""}', "question must be a non-blank string"),
        ('{"question":"  \\n"}', "question must be a non-blank string"),
        ('{"question":7}', "question must be a non-blank string"),
        ('{"question":"q","choices":"S"}', "choices must be a list of strings or null"),
        ('{"question":"q","choices":["S",""]}', "every choice must be a non-blank string"),
        ('{"question":"q","choices":["S",1]}', "every choice must be a non-blank string"),
        ('{"question":"q","choices":["S","S"]}', "choices must not repeat"),
        ('{"question":"q","allows_free_text":"no"}', "allows_free_text must be a boolean or null"),
        ('{"question":"q","allows_free_text":0}', "allows_free_text must be a boolean or null"),
        (
            '{"question":"q","allows_free_text":false}',
            "allows_free_text is false, so choices are required",
        ),
        (
            '{"question":"q","choices":[],"allows_free_text":false}',
            "allows_free_text is false, so choices are required",
        ),
        ('{"question":"q","urgent":true,"color":1}', "unknown arguments: color, urgent"),
    ],
)
def test_invalid_ask_user_arguments(arguments: str, reason: str) -> None:
    with pytest.raises(ToolExecutionError) as caught:
        parse_ask_user_arguments(arguments)
    assert str(caught.value) == f"invalid ask_user arguments: {reason}"


@pytest.mark.parametrize(
    ("answer", "choices", "allows_free_text", "allowed"),
    [
        ("M", ("S", "M"), False, True),
        ("XL", ("S", "M"), False, False),
        ("m", ("S", "M"), False, False),
        (" M", ("S", "M"), False, False),
        ("XL", ("S", "M"), True, True),
        ("anything", (), True, True),
        ("", (), True, False),
        ("   ", ("S",), True, False),
        ("\n", ("\n",), False, False),
    ],
)
def test_answer_validation(
    answer: str, choices: tuple[str, ...], allows_free_text: bool, allowed: bool
) -> None:
    assert is_allowed_answer(answer, choices=choices, allows_free_text=allows_free_text) is allowed


@pytest.mark.parametrize(
    ("answer", "output"),
    [
        ("M", '{"status":"answered","answer":"M"}'),
        ("grüße", '{"status":"answered","answer":"grüße"}'),
        ('say "hi"\n', '{"status":"answered","answer":"say \\"hi\\"\\n"}'),
    ],
)
def test_ask_user_answer_output(answer: str, output: str) -> None:
    assert ask_user_answer_output(answer) == output


@settings(max_examples=75, deadline=None)
@given(answer=st.text())
def test_the_answer_output_carries_the_answer(answer: str) -> None:
    assert json.loads(ask_user_answer_output(answer)) == {"status": "answered", "answer": answer}


# --- durable_wait ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            '{"duration_seconds":1,"reason":"r"}',
            DurableWaitArguments(duration_seconds=1, reason="r"),
        ),
        (
            '{"duration_seconds":31536000,"reason":"a year"}',
            DurableWaitArguments(duration_seconds=31_536_000, reason="a year"),
        ),
        (
            '{"duration_seconds":60.0,"reason":"build"}',
            DurableWaitArguments(duration_seconds=60, reason="build"),
        ),
        (
            {"duration_seconds": 5, "reason": "grüße"},
            DurableWaitArguments(duration_seconds=5, reason="grüße"),
        ),
    ],
)
def test_durable_wait_arguments_parse(arguments: Any, expected: DurableWaitArguments) -> None:
    assert parse_durable_wait_arguments(arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("{", "arguments are not valid JSON"),
        ("[60]", "arguments must be a JSON object"),
        ('{"reason":"r"}', "duration_seconds is required"),
        ('{"duration_seconds":null,"reason":"r"}', "duration_seconds is required"),
        ('{"duration_seconds":5}', "reason is required"),
        ('{"duration_seconds":5,"reason":null}', "reason is required"),
        ('{"duration_seconds":0,"reason":"r"}', "duration_seconds must be from 1 to 31536000"),
        ('{"duration_seconds":-5,"reason":"r"}', "duration_seconds must be from 1 to 31536000"),
        (
            '{"duration_seconds":31536001,"reason":"r"}',
            "duration_seconds must be from 1 to 31536000",
        ),
        (
            '{"duration_seconds":1.5,"reason":"r"}',
            "duration_seconds must be a whole number of seconds",
        ),
        (
            '{"duration_seconds":"60","reason":"r"}',
            "duration_seconds must be a whole number of seconds",
        ),
        (
            '{"duration_seconds":true,"reason":"r"}',
            "duration_seconds must be a whole number of seconds",
        ),
        (
            '{"duration_seconds":Infinity,"reason":"r"}',
            "duration_seconds must be a whole number of seconds",
        ),
        ('{"duration_seconds":5,"reason":" "}', "reason must be a non-blank string"),
        ('{"duration_seconds":5,"reason":5}', "reason must be a non-blank string"),
        ('{"duration_seconds":5,"reason":"r","unit":"s"}', "unknown arguments: unit"),
    ],
)
def test_invalid_durable_wait_arguments(arguments: str, reason: str) -> None:
    with pytest.raises(ToolExecutionError) as caught:
        parse_durable_wait_arguments(arguments)
    assert str(caught.value) == f"invalid durable_wait arguments: {reason}"


@pytest.mark.parametrize(
    ("max_durable_wait", "duration", "accepted"),
    [
        (timedelta(hours=1), 3600, True),
        (timedelta(hours=1), 3601, False),
        (timedelta(seconds=90.5), 90, True),
        (timedelta(seconds=90.5), 91, False),
    ],
)
def test_max_durable_wait_bounds_the_duration(
    max_durable_wait: timedelta, duration: int, accepted: bool
) -> None:
    arguments = {"duration_seconds": duration, "reason": "r"}
    if accepted:
        parsed = parse_durable_wait_arguments(arguments, max_durable_wait=max_durable_wait)
        assert parsed.duration_seconds == duration
    else:
        limit = max_durable_wait_seconds(max_durable_wait)
        with pytest.raises(ToolExecutionError, match=f"must be from 1 to {limit}$"):
            parse_durable_wait_arguments(arguments, max_durable_wait=max_durable_wait)


def test_durable_wait_until_adds_the_duration() -> None:
    assert durable_wait_until(NOW, 90) == datetime(2025, 3, 1, 12, 1, 30, tzinfo=UTC)
    assert durable_wait_until(NOW, 31_536_000) == datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("remaining", "seconds"),
    [
        (timedelta(seconds=90), 90),
        (timedelta(seconds=89, microseconds=1), 90),
        (timedelta(seconds=89, microseconds=999_999), 90),
        (timedelta(microseconds=1), 1),
        (timedelta(0), 0),
        (timedelta(seconds=-3), 0),
        (timedelta(days=365), 31_536_000),
    ],
)
def test_timer_seconds_round_up(remaining: timedelta, seconds: int) -> None:
    assert timer_seconds_until(NOW, NOW + remaining) == seconds


@settings(max_examples=100, deadline=None)
@given(microseconds=st.integers(min_value=1, max_value=10**12))
def test_a_timer_never_fires_early_nor_a_second_late(microseconds: int) -> None:
    remaining = timedelta(microseconds=microseconds)
    seconds = timer_seconds_until(NOW, NOW + remaining)
    assert timedelta(seconds=seconds) >= remaining
    assert timedelta(seconds=seconds - 1) < remaining


@pytest.mark.parametrize(
    ("waited", "reason", "output"),
    [
        (60, "build", '{"status":"completed","waited_seconds":60,"reason":"build"}'),
        (1, "café", '{"status":"completed","waited_seconds":1,"reason":"café"}'),
        (5, 'a "b"', '{"status":"completed","waited_seconds":5,"reason":"a \\"b\\""}'),
    ],
)
def test_durable_wait_output(waited: int, reason: str, output: str) -> None:
    assert durable_wait_output(waited, reason) == output


# --- write_todos -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"todos":[]}', ()),
        (
            '{"todos":[{"content":"Back up","status":"completed"},'
            '{"content":"Migrate","status":"in_progress"},{"content":"Verify","status":"pending"}]}',
            (
                AgentTodo(content="Back up", status=TodoStatus.COMPLETED),
                AgentTodo(content="Migrate", status=TodoStatus.IN_PROGRESS),
                AgentTodo(content="Verify", status=TodoStatus.PENDING),
            ),
        ),
        (
            {"todos": [{"content": "Prüfen", "status": "pending"}]},
            (AgentTodo(content="Prüfen", status=TodoStatus.PENDING),),
        ),
    ],
)
def test_write_todos_arguments_parse(arguments: Any, expected: tuple[AgentTodo, ...]) -> None:
    assert parse_write_todos_arguments(arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("nope", "arguments are not valid JSON"),
        ("[]", "arguments must be a JSON object"),
        ("{}", "todos is required"),
        ('{"todos":null}', "todos is required"),
        ('{"todos":"a"}', "todos must be a list"),
        ('{"todos":{"content":"a","status":"pending"}}', "todos must be a list"),
        ('{"todos":["a"]}', "todos[0] must be an object with content and status"),
        (
            '{"todos":[{"content":"a","status":"pending"},{"content":"","status":"pending"}]}',
            "todos[1].content must be a non-blank string",
        ),
        ('{"todos":[{"status":"pending"}]}', "todos[0].content must be a non-blank string"),
        (
            '{"todos":[{"content":3,"status":"pending"}]}',
            "todos[0].content must be a non-blank string",
        ),
        (
            '{"todos":[{"content":"a","status":"done"}]}',
            "todos[0].status must be one of pending, in_progress, completed",
        ),
        (
            '{"todos":[{"content":"a"}]}',
            "todos[0].status must be one of pending, in_progress, completed",
        ),
        (
            '{"todos":[{"content":"a","status":"pending","id":1}]}',
            "todos[0] has unknown keys: id",
        ),
        ('{"todos":[],"merge":true}', "unknown arguments: merge"),
    ],
)
def test_invalid_write_todos_arguments(arguments: str, reason: str) -> None:
    with pytest.raises(ToolExecutionError) as caught:
        parse_write_todos_arguments(arguments)
    assert str(caught.value) == f"invalid todos: {reason}"
