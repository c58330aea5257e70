"""The constructors users call refuse a wrong type at once, naming the field.

Each case was accepted and failed every turn later, or raised an error from deep
inside that named no field (``'<=' not supported``, ``'str' object has no
attribute 'value'``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.scripted_model import ScriptedModelClient, ScriptedModelReply
from dex_agents.app.options import AgentSessionOptions, AgentTracingOptions, RunModelLimit
from dex_agents.builtin_loop import builtin_agent_session_flow, builtin_agent_session_options
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy


def _reply(_: object) -> ScriptedModelReply:
    return ScriptedModelReply(text="hi")


MODEL = ScriptedModelClient(_reply)


async def _async_instructions(context: object) -> str:
    return "Help."


def _untyped(value: object) -> Any:
    """``value`` past the type checker, as a caller without one passes it."""
    return value


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("timeout", 60, "RunModelLimit: timeout must be a timedelta, not int (60)"),
        ("maximum_attempts", "3", "RunModelLimit: maximum_attempts must be an int"),
        ("maximum_attempts", float("nan"), "RunModelLimit: maximum_attempts must be an int"),
        ("total_duration", None, "RunModelLimit: total_duration must be a timedelta, not None"),
    ],
)
def test_run_model_limit(field: str, value: Any, expected: str) -> None:
    with pytest.raises(TypeError, match=re.escape(expected)):
        RunModelLimit(**{field: value})


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("spend_limit", 5, "spend_limit must be a ModelSpendLimit or None"),
        ("run_model_limit", None, "run_model_limit must be a RunModelLimit, not None"),
        ("tool_policies", None, "tool_policies must be a mapping, not None"),
        ("interrupt_deadline", 30, "interrupt_deadline must be a timedelta or None"),
        ("event_stream_capacity_bytes", "5", "event_stream_capacity_bytes must be an int"),
        ("event_stream_capacity_bytes", float("inf"), "event_stream_capacity_bytes must be an int"),
        ("tracing", None, "tracing must be AgentTracingOptions, not None"),
        ("plan_mode_enabled", "no", "plan_mode_enabled must be a bool"),
        ("default_tool_effect", "bogus", "default_tool_effect must be a ToolEffect"),
        # A policy under a key that is no tool name was kept and matched no tool.
        ("tool_policies", {1: ToolPolicy("read")}, "every key of tool_policies must be a tool"),
        ("tool_policies", {"x": "read"}, "tool_policies['x'] must be a ToolPolicy, not str"),
        ("built_in_tools", frozenset({"ask_user"}), "built_in_tools must be BuiltInTool values"),
        ("compaction", 100, "compaction must be a CompactionPolicy or None"),
    ],
)
def test_agent_session_options(field: str, value: Any, expected: str) -> None:
    with pytest.raises(TypeError, match=re.escape(f"AgentSessionOptions: {expected}")):
        AgentSessionOptions(**{field: value})


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        # bool("false") is True: content was captured, and tracing stayed on.
        (
            "should_capture_message_content",
            "false",
            "AgentTracingOptions: should_capture_message_content must be a bool, not str ('false')",
        ),
        ("is_enabled", 0, "AgentTracingOptions: is_enabled must be a bool, not int (0)"),
        ("agent_name", 5, "AgentTracingOptions: agent_name must be a str or None, not int (5)"),
    ],
)
def test_agent_tracing_options(field: str, value: Any, expected: str) -> None:
    with pytest.raises(TypeError, match=re.escape(expected)):
        AgentTracingOptions(**{field: value})


class SyncSpendLimit:
    """A ``ModelSpendLimit`` by shape whose methods are plain functions."""

    def check_model_call(self, call: object) -> None:
        pass

    def record_model_usage(self, call: object, usage: object) -> None:
        pass


class HalfAsyncSpendLimit(SyncSpendLimit):
    async def check_model_call(self, call: object) -> None:  # type: ignore[override]
        pass


@pytest.mark.parametrize(
    ("limit", "method"),
    [(SyncSpendLimit(), "check_model_call"), (HalfAsyncSpendLimit(), "record_model_usage")],
)
def test_a_spend_limit_with_a_method_that_is_not_async_is_refused(
    limit: object, method: str
) -> None:
    # It passed the isinstance check, then failed every turn with "object NoneType
    # can't be used in 'await' expression".
    expected = (
        f"AgentSessionOptions: spend_limit.{method} must be a coroutine function (async def), "
        f"as ModelSpendLimit declares; {type(limit).__name__}'s is not"
    )
    with pytest.raises(TypeError, match=re.escape(expected)):
        AgentSessionOptions(spend_limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["interrupt_deadline", "max_durable_wait"])
def test_a_span_that_no_date_can_end_is_refused_by_name(field: str) -> None:
    # timedelta.max, meant as "forever", was accepted, and every approval, question or
    # wait then overflowed: a turn failed after three model calls, naming no option.
    expected = f"AgentSessionOptions: {field} is too long ("
    too_long: dict[str, Any] = {field: timedelta.max}
    with pytest.raises(ValueError, match=re.escape(expected)):
        AgentSessionOptions(**too_long)
    long: dict[str, Any] = {field: timedelta(days=365 * 1000)}
    AgentSessionOptions(**long)  # a long one is still fine


@pytest.mark.parametrize(
    ("field", "value", "error", "expected"),
    [
        ("model", None, TypeError, "AgentDefinition: model must be a ModelClient, not None"),
        ("tools", None, TypeError, "AgentDefinition: tools must be a collection, not None"),
        ("built_in_tools", ["ask_user"], TypeError, "built_in_tools must be BuiltInTool values"),
        ("max_output_tokens", "5", TypeError, "max_output_tokens must be an int or None"),
        ("plan_mode_enabled", "no", TypeError, "plan_mode_enabled must be a bool"),
        ("tool_source_listing_timeout", float("inf"), ValueError, "tool_source_listing_timeout"),
        ("tool_source_listing_timeout", float("nan"), ValueError, "tool_source_listing_timeout"),
        ("tool_source_listing_timeout", 1e300, ValueError, "tool_source_listing_timeout"),
        ("tool_policies", [], TypeError, "AgentDefinition: tool_policies must be a mapping"),
        (
            "tool_policies",
            {None: ToolPolicy("read")},
            TypeError,
            "AgentDefinition: every key of tool_policies must be a tool name (str), not None",
        ),
        # It was kept, and building the session Flow failed naming AgentSessionOptions.
        ("default_tool_effect", 5, TypeError, "AgentDefinition: default_tool_effect must be a "),
        ("default_tool_effect", "bogus", TypeError, "default_tool_effect must be a ToolEffect"),
        ("model_settings", None, TypeError, "AgentDefinition: model_settings must be a mapping"),
        # Taken, and LiteLLMModelClient refused it in every RunModel.
        (
            "model_settings",
            {1: "x"},
            TypeError,
            "AgentDefinition: model_settings keys must be setting names (str), not int (1)",
        ),
        (
            "model_settings",
            {b"temperature": 0.2},
            TypeError,
            "AgentDefinition: model_settings keys must be setting names (str), "
            "not bytes (b'temperature')",
        ),
        (
            "decide_turn_continuation",
            "end",
            TypeError,
            "AgentDefinition: decide_turn_continuation must be a function or None, not str",
        ),
        (
            "resolve_model",
            MODEL,
            TypeError,
            "AgentDefinition: resolve_model must be a function or None, not ScriptedModelClient",
        ),
        (
            "instructions",
            _async_instructions,
            TypeError,
            "AgentDefinition: instructions must be a string or a plain function of "
            "InstructionContext, not a coroutine function (async def)",
        ),
    ],
)
def test_agent_definition(field: str, value: Any, error: type[Exception], expected: str) -> None:
    with pytest.raises(error, match=re.escape(expected)):
        AgentDefinition(
            **{"name": "support", "instructions": "Help.", "model": MODEL, field: value}
        )


def test_a_tool_effect_string_converts_as_in_tool_policy() -> None:
    # ToolPolicy("read") converted the wire string, while AgentSessionOptions refused
    # default_tool_effect="read" with a TypeError: one value, two answers.
    assert ToolPolicy("read").effect is ToolEffect.READ
    options = AgentSessionOptions(default_tool_effect=_untyped("read"))
    assert options.default_tool_effect is ToolEffect.READ
    definition = AgentDefinition(
        name="support", instructions="Help.", model=MODEL, default_tool_effect=_untyped("read")
    )
    assert definition.default_tool_effect is ToolEffect.READ
    assert builtin_agent_session_options(definition).default_tool_effect is ToolEffect.READ


@pytest.mark.parametrize("store", ["/srv/media", object()])
def test_a_media_store_that_is_not_one_is_refused(store: object) -> None:
    # It was taken, and every turn with an image failed with "'str' object has no
    # attribute 'get_image'".
    definition = AgentDefinition(name="support", instructions="Help.", model=MODEL)
    expected = (
        "BuiltinLoopAgentRunner: media_store must be a MediaStore or None "
        f"(such as LocalDirectoryMediaStore), not {type(store).__name__}"
    )
    with pytest.raises(TypeError, match=re.escape(expected)):
        builtin_agent_session_flow(definition, flow_type="Support", media_store=_untyped(store))


def test_the_right_types_still_pass() -> None:
    RunModelLimit(timeout=timedelta(seconds=5), maximum_attempts=2)
    AgentSessionOptions(
        interrupt_deadline=timedelta(minutes=1),
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
        event_stream_capacity_bytes=1024,
    )
    AgentDefinition(name="support", instructions="Help.", model=MODEL, max_output_tokens=5)
    AgentTracingOptions(is_enabled=False, agent_name="Triage", should_capture_message_content=True)
