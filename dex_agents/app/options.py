"""``AgentSessionOptions``: how one agent Flow type runs its sessions.

A frozen dataclass, because the spec changes it with ``dataclasses.replace``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dex_agents.domain.arguments import (
    require_bool,
    require_instance,
    require_int,
    require_optional_str,
)
from dex_agents.domain.builtin_tools import DEFAULT_MAX_DURABLE_WAIT, BuiltInTool
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.domain.tool_effects import (
    DEFAULT_TOOL_EFFECT,
    ToolEffect,
    ToolPolicy,
    require_tool_effect,
    require_tool_policies,
)
from dex_agents.domain.tracing import GenAISemanticConventionsVersion
from dex_agents.domain.windowing import (
    DEFAULT_MESSAGE_CHUNK_MAX_BYTES,
    DEFAULT_MESSAGE_CHUNK_SIZE,
    DEFAULT_MESSAGE_WINDOW_SIZE,
    DEFAULT_RETAINED_MESSAGE_LIMIT,
    MessageStorageOptions,
)
from dex_agents.ports.session_schema import DEFAULT_EVENT_STREAM_CAPACITY_BYTES
from dex_agents.ports.spend_limit import ModelSpendLimit


@dataclass(frozen=True, kw_only=True)
class RunModelLimit:
    """``RunModel``'s (and ``CompactContext``'s) attempt timeout, heartbeat timeout and retries.

    The defaults are the spec's: 15 minutes per attempt, a 2 minute heartbeat
    timeout, and 3 attempts within 30 minutes.
    """

    timeout: timedelta = timedelta(minutes=15)
    heartbeat_timeout: timedelta = timedelta(minutes=2)
    maximum_attempts: int = 3
    total_duration: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        # Types first: "3" or NaN would pass or break the comparisons below unnamed.
        require_int("RunModelLimit", "maximum_attempts", self.maximum_attempts)
        for name in ("timeout", "heartbeat_timeout", "total_duration"):
            require_instance("RunModelLimit", name, getattr(self, name), timedelta, "a timedelta")
        if self.maximum_attempts < 1:
            raise ValueError(
                f"run_model_limit.maximum_attempts must be at least 1, not {self.maximum_attempts}"
            )
        for name in ("timeout", "heartbeat_timeout", "total_duration"):
            if getattr(self, name) <= timedelta(0):
                raise ValueError(f"run_model_limit.{name} must be positive")


@dataclass(frozen=True, kw_only=True)
class AgentTracingOptions:
    """How the session emits OpenTelemetry GenAI spans (``AgentSessionOptions.tracing``).

    ``is_enabled`` ``False`` emits nothing and never imports OpenTelemetry.
    ``tracer_provider`` ``None`` uses the global provider. ``agent_name`` ``None``
    uses the Flow type (``gen_ai.agent.name`` and the ``invoke_agent`` span name).
    ``should_capture_message_content`` puts message text, tool arguments and tool
    results on spans. ``semantic_conventions_version`` pins the conventions.
    """

    is_enabled: bool = True
    tracer_provider: Any | None = None
    agent_name: str | None = None
    should_capture_message_content: bool = False
    semantic_conventions_version: GenAISemanticConventionsVersion = (
        GenAISemanticConventionsVersion.V1_42_0_DEV
    )

    def __post_init__(self) -> None:
        # bool("false") is True: such a flag turned content capture on, or tracing on.
        require_bool("AgentTracingOptions", "is_enabled", self.is_enabled)
        require_bool(
            "AgentTracingOptions",
            "should_capture_message_content",
            self.should_capture_message_content,
        )
        require_optional_str("AgentTracingOptions", "agent_name", self.agent_name)
        if self.agent_name is not None and not self.agent_name:
            raise ValueError("tracing.agent_name must be non-empty or None")
        if not isinstance(self.semantic_conventions_version, GenAISemanticConventionsVersion):
            raise TypeError(
                "tracing.semantic_conventions_version must be a GenAISemanticConventionsVersion"
            )


def _require_async_methods(limit: ModelSpendLimit) -> None:
    # The session awaits both methods. A plain def passed the isinstance check, then
    # failed every turn with "object NoneType can't be used in 'await' expression".
    for name in ("check_model_call", "record_model_usage"):
        if not inspect.iscoroutinefunction(getattr(limit, name)):
            raise TypeError(
                f"AgentSessionOptions: spend_limit.{name} must be a coroutine function"
                f" (async def), as ModelSpendLimit declares; {type(limit).__name__}'s is not"
            )


def _check_reaches_a_date(name: str, span: timedelta | None) -> None:
    # A deadline or a wait ends at now + span. Past the last datetime (such as
    # timedelta.max, meant as "forever") that sum overflowed in every approval,
    # question or wait: a turn failed after three model calls with "date value out
    # of range", naming no option.
    if span is None:
        return
    try:
        datetime.now(UTC) + span
    except OverflowError:
        raise ValueError(
            f"AgentSessionOptions: {name} is too long ({span}): no date is that far from now"
        ) from None


@dataclass(frozen=True, kw_only=True)
class AgentSessionOptions:
    """The options of an ``AgentSessionFlow``.

    ``tool_policies`` override effects and approvals per tool name;
    ``default_tool_effect`` (``unclassified``) applies to a tool nothing else
    classifies. ``built_in_tools`` are the built-ins the session offers;
    ``plan_mode_enabled`` needs ``write_todos`` and a ``PlanModeRunner``.
    ``interrupt_deadline`` bounds how long approvals and questions wait.
    ``compaction`` keeps model input under the context window. The message
    storage fields and ``retained_message_limit`` (``None`` keeps everything) are
    those of "Message storage and retention". ``event_stream_capacity_bytes`` is
    the ``AgentEvents`` Stream capacity (10 MiB). ``spend_limit`` is asked before
    each model call. ``tracing`` configures the OpenTelemetry spans.
    """

    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    default_tool_effect: ToolEffect = DEFAULT_TOOL_EFFECT
    built_in_tools: frozenset[BuiltInTool] = frozenset()
    interrupt_deadline: timedelta | None = None
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT
    plan_mode_enabled: bool = False
    compaction: CompactionPolicy | None = None
    message_window_size: int = DEFAULT_MESSAGE_WINDOW_SIZE
    message_chunk_size: int = DEFAULT_MESSAGE_CHUNK_SIZE
    message_chunk_max_bytes: int = DEFAULT_MESSAGE_CHUNK_MAX_BYTES
    retained_message_limit: int | None = DEFAULT_RETAINED_MESSAGE_LIMIT
    event_stream_capacity_bytes: int = DEFAULT_EVENT_STREAM_CAPACITY_BYTES
    run_model_limit: RunModelLimit = field(default_factory=RunModelLimit)
    spend_limit: ModelSpendLimit | None = None
    tracing: AgentTracingOptions = field(default_factory=AgentTracingOptions)

    def __post_init__(self) -> None:
        self._check_types()
        self.message_storage()  # validates the storage fields, naming the bad one
        if self.interrupt_deadline is not None and self.interrupt_deadline <= timedelta(0):
            raise ValueError("interrupt_deadline must be positive")
        if self.max_durable_wait < timedelta(seconds=1):
            raise ValueError("max_durable_wait must be at least 1 second")
        _check_reaches_a_date("interrupt_deadline", self.interrupt_deadline)
        _check_reaches_a_date("max_durable_wait", self.max_durable_wait)
        if self.event_stream_capacity_bytes <= 0:
            raise ValueError("event_stream_capacity_bytes must be positive")
        if self.plan_mode_enabled and BuiltInTool.WRITE_TODOS not in self.built_in_tools:
            raise ValueError(
                "plan_mode_enabled needs the write_todos built-in tool in built_in_tools"
            )

    def _check_types(self) -> None:
        # A wrong type here was accepted and failed every turn later ("'int' object has no
        # attribute 'check_model_call'"), or failed a comparison without naming the field.
        where = "AgentSessionOptions"
        none = type(None)
        require_tool_policies(where, self.tool_policies)
        # Frozen: the converted value needs object.__setattr__.
        effect = require_tool_effect(where, "default_tool_effect", self.default_tool_effect)
        object.__setattr__(self, "default_tool_effect", effect)
        for tool in self.built_in_tools:
            require_instance(where, "built_in_tools", tool, BuiltInTool, "BuiltInTool values")
        require_instance(
            where,
            "interrupt_deadline",
            self.interrupt_deadline,
            (timedelta, none),
            "a timedelta or None",
        )
        require_instance(where, "max_durable_wait", self.max_durable_wait, timedelta, "a timedelta")
        require_bool(where, "plan_mode_enabled", self.plan_mode_enabled)
        require_instance(
            where,
            "compaction",
            self.compaction,
            (CompactionPolicy, none),
            "a CompactionPolicy or None",
        )
        require_int(where, "event_stream_capacity_bytes", self.event_stream_capacity_bytes)
        require_instance(
            where, "run_model_limit", self.run_model_limit, RunModelLimit, "a RunModelLimit"
        )
        require_instance(
            where,
            "spend_limit",
            self.spend_limit,
            (ModelSpendLimit, none),
            "a ModelSpendLimit or None",
        )
        if self.spend_limit is not None:
            _require_async_methods(self.spend_limit)
        require_instance(where, "tracing", self.tracing, AgentTracingOptions, "AgentTracingOptions")

    def message_storage(self) -> MessageStorageOptions:
        """The message storage fields as the domain's ``MessageStorageOptions``."""
        return MessageStorageOptions(
            message_window_size=self.message_window_size,
            message_chunk_size=self.message_chunk_size,
            message_chunk_max_bytes=self.message_chunk_max_bytes,
            retained_message_limit=self.retained_message_limit,
        )
