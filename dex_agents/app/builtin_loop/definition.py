"""``AgentDefinition``: an agent of the built-in loop, defined in Dex terms ("Built-in agent loop").

An instructions function receives an ``InstructionContext`` in every ``RunModel``;
``decide_turn_continuation`` receives a ``TurnContinuationContext`` at the end of
each loop iteration ("Ending or continuing a turn").
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, TypeAlias

from dex_agents.app.builtin_loop.function_tools import FunctionTool
from dex_agents.app.builtin_loop.tool_sources import (
    DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT,
    check_tool_sources,
)
from dex_agents.domain.arguments import require_bool, require_instance, require_optional_int
from dex_agents.domain.builtin_tools import BuiltInTool, check_no_reserved_tool_names
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.domain.model_io import ModelOutputItem, ToolResultItem
from dex_agents.domain.secrets import redact_secrets
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_effects import (
    DEFAULT_TOOL_EFFECT,
    ToolEffect,
    ToolPolicy,
    require_tool_effect,
    require_tool_policies,
)
from dex_agents.domain.turns import DEFAULT_MAX_MODEL_CALLS_PER_TURN, TurnContinuation
from dex_agents.ports.model_client import ModelClient, model_supports_forced_tool_choice
from dex_agents.ports.session_schema import DEFAULT_EVENT_STREAM_CAPACITY_BYTES
from dex_agents.ports.tool_source import ToolSource


@dataclass(frozen=True, kw_only=True)
class InstructionContext:
    """What an instructions function receives in every ``RunModel``.

    ``session_settings`` is the running turn's copy, empty when there are none.
    """

    flow_id: str
    turn_id: str
    session_settings: Mapping[str, Any] = field(default_factory=dict)
    interaction_mode: InteractionMode = InteractionMode.CHAT


@dataclass(frozen=True, kw_only=True)
class TurnContinuationContext:
    """What ``decide_turn_continuation`` receives at the end of a loop iteration.

    ``model_output`` are the iteration's output items; ``tool_results`` the
    results of its tool calls, empty when the model answered without tools.
    """

    flow_id: str
    turn_id: str
    session_settings: Mapping[str, Any]
    model_output: tuple[ModelOutputItem, ...]
    tool_results: tuple[ToolResultItem, ...]


Instructions: TypeAlias = str | Callable[[InstructionContext], str]
"""``AgentDefinition.instructions``: a string, or a function of ``InstructionContext``."""

DecideTurnContinuation: TypeAlias = Callable[
    [TurnContinuationContext], "TurnContinuation | Awaitable[TurnContinuation]"
]
"""``AgentDefinition.decide_turn_continuation``: sync or async."""

PlanningToolChoice: TypeAlias = Literal["auto", "required"]
"""``AgentDefinition.planning_tool_choice``: ``"auto"`` or ``"required"``."""

PLANNING_TOOL_CHOICES: tuple[str, ...] = ("auto", "required")
"""The values of ``AgentDefinition.planning_tool_choice``."""

ResolveModel: TypeAlias = Callable[[Mapping[str, Any]], ModelClient]
"""``AgentDefinition.resolve_model``: the turn's session settings to its ``ModelClient``."""


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """An agent of the built-in loop; ``builtin_agent_session_flow`` runs it.

    ``instructions`` is a string or a function of ``InstructionContext`` evaluated
    in every ``RunModel``. ``tools`` are function tools; ``tool_policies``,
    ``default_tool_effect``, ``built_in_tools``, ``interrupt_deadline``,
    ``event_stream_capacity_bytes`` and ``plan_mode_enabled`` become the
    session's ``AgentSessionOptions`` (``plan_mode_enabled`` adds
    ``write_todos``). After ``max_model_calls_per_turn`` (100) model calls in
    one turn the next call offers no tools. ``decide_turn_continuation`` decides
    at the end of each loop iteration whether the turn ends or continues.
    ``resolve_model`` maps the turn's session settings to the ``ModelClient`` of
    each model call, else ``model`` makes every call. A function tool may not
    share a name with an enabled built-in tool, and tool names are unique.
    ``tool_sources`` list their tools in every ``RunModel`` of a chat or executing
    turn, each for at most ``tool_source_listing_timeout`` (10 seconds; seconds
    as a number are accepted too); their ``source_name`` values are unique, and
    each source's ``declared_tool_names()`` are checked with the listing's clash
    rules when the definition is built. ``compaction`` becomes the session's
    ``AgentSessionOptions.compaction``. ``planning_tool_choice`` is ``"auto"``: a
    planning turn offers only ``write_todos`` and may answer in text; ``"required"``
    forces ``write_todos`` on the first model call of a planning turn while no
    draft exists, and raises ``ValueError`` when ``model``'s
    ``supports_forced_tool_choice(model_settings)`` returns ``False``; a model
    that ``resolve_model`` picks and that refuses one is not forced.
    """

    name: str
    instructions: Instructions
    model: ModelClient
    # Settings may hold a provider's key, so the repr leaves them out.
    model_settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    tools: Sequence[FunctionTool] = ()
    tool_sources: Sequence[ToolSource] = ()
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    default_tool_effect: ToolEffect = DEFAULT_TOOL_EFFECT
    built_in_tools: frozenset[BuiltInTool] = frozenset()
    max_model_calls_per_turn: int = DEFAULT_MAX_MODEL_CALLS_PER_TURN
    interrupt_deadline: timedelta | None = None
    event_stream_capacity_bytes: int = DEFAULT_EVENT_STREAM_CAPACITY_BYTES
    plan_mode_enabled: bool = False
    decide_turn_continuation: DecideTurnContinuation | None = None
    max_output_tokens: int | None = None
    resolve_model: ResolveModel | None = None
    tool_source_listing_timeout: timedelta = DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT
    compaction: CompactionPolicy | None = None
    planning_tool_choice: PlanningToolChoice = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"AgentDefinition.name must be a non-empty string, not {self.name!r}")
        if not (isinstance(self.instructions, str) or callable(self.instructions)):
            raise TypeError(
                "AgentDefinition.instructions must be a string or a function of "
                f"InstructionContext, not {type(self.instructions).__name__}"
            )
        self._check_types()
        # Frozen: normalizing a field needs object.__setattr__ in __post_init__.
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "built_in_tools", frozenset(self.built_in_tools))
        seen: set[str] = set()
        for tool in self.tools:
            if not isinstance(tool, FunctionTool):
                raise TypeError(
                    "AgentDefinition.tools must be FunctionTool values (use @function_tool), "
                    f"not {type(tool).__name__}"
                )
            if tool.name in seen:
                raise ValueError(f"two tools of AgentDefinition are named {tool.name}")
            seen.add(tool.name)
        check_no_reserved_tool_names(
            (tool.name for tool in self.tools), self.enabled_built_in_tools
        )
        object.__setattr__(self, "tool_sources", tuple(self.tool_sources))
        check_tool_sources(
            self.tool_sources, seen, {tool.value for tool in self.enabled_built_in_tools}
        )
        timeout: object = self.tool_source_listing_timeout
        # NaN, infinity and past timedelta's range are no number of seconds (timedelta
        # raises an unnamed error).
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            try:
                timeout = timedelta(seconds=timeout) if math.isfinite(timeout) else None
            except OverflowError:
                timeout = None
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            raise ValueError(
                "tool_source_listing_timeout must be a positive timedelta or number of seconds, "
                f"not {self.tool_source_listing_timeout!r}"
            )
        object.__setattr__(self, "tool_source_listing_timeout", timeout)
        limit = self.max_model_calls_per_turn
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"max_model_calls_per_turn must be an int from 1, not {limit!r}")
        if self.compaction is not None and not isinstance(self.compaction, CompactionPolicy):
            raise TypeError(
                "AgentDefinition.compaction must be a CompactionPolicy or None, "
                f"not {type(self.compaction).__name__}"
            )
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            raise ValueError(
                f"max_output_tokens must be None or at least 1, not {self.max_output_tokens}"
            )
        self._check_planning_tool_choice()

    def _check_types(self) -> None:
        # A wrong type here was accepted and failed every turn later ("'NoneType' object has
        # no attribute 'call_model'"), or failed deeper without naming the field.
        where = "AgentDefinition"
        require_instance(where, "model", self.model, ModelClient, "a ModelClient")
        for name in ("tools", "tool_sources", "built_in_tools"):
            value = getattr(self, name)
            if isinstance(value, str | bytes) or not isinstance(value, Iterable):
                raise TypeError(f"{where}: {name} must be a collection, not {value!r}")
        for tool in self.built_in_tools:
            require_instance(where, "built_in_tools", tool, BuiltInTool, "BuiltInTool values")
        require_optional_int(where, "max_output_tokens", self.max_output_tokens)
        require_bool(where, "plan_mode_enabled", self.plan_mode_enabled)
        require_tool_policies(where, self.tool_policies)
        # Checked here, not first in AgentSessionOptions under another name.
        effect = require_tool_effect(where, "default_tool_effect", self.default_tool_effect)
        object.__setattr__(self, "default_tool_effect", effect)
        if not isinstance(self.model_settings, Mapping):
            # Never the value: settings may hold a provider's key.
            raise TypeError(
                f"{where}: model_settings must be a mapping, "
                f"not {type(self.model_settings).__name__}"
            )
        for key in self.model_settings:
            # A model client passes them as named settings: LiteLLM's refused a key of
            # another type only in RunModel, failing every turn.
            if not isinstance(key, str):
                raise TypeError(
                    f"{where}: model_settings keys must be setting names (str), "
                    f"not {type(key).__name__} ({key!r:.40})"
                )
        # Both are called in RunModel: "'str' object is not callable" failed every turn.
        for name in ("decide_turn_continuation", "resolve_model"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(
                    f"{where}: {name} must be a function or None, not {type(value).__name__}"
                )
        # Evaluated without an await, in RunModel and in the synchronous token estimate:
        # an async def failed every turn with "returned coroutine, not a string".
        if inspect.iscoroutinefunction(self.instructions):
            raise TypeError(
                f"{where}: instructions must be a string or a plain function of "
                "InstructionContext, not a coroutine function (async def)"
            )

    def _check_planning_tool_choice(self) -> None:
        choice = self.planning_tool_choice
        if choice not in PLANNING_TOOL_CHOICES:
            raise ValueError(
                f'AgentDefinition.planning_tool_choice must be "auto" or "required", not {choice!r}'
            )
        if choice == "required" and not model_supports_forced_tool_choice(
            self.model, self.model_settings
        ):
            raise ValueError(
                f'planning_tool_choice "required" needs a model that accepts a forced tool '
                f"choice, but the model client of agent {self.name} refuses one with "
                f"model_settings {redact_secrets(dict(self.model_settings))!r}"
            )

    @property
    def enabled_built_in_tools(self) -> frozenset[BuiltInTool]:
        """``built_in_tools``, plus ``write_todos`` when ``plan_mode_enabled``."""
        if self.plan_mode_enabled:
            return self.built_in_tools | {BuiltInTool.WRITE_TODOS}
        return self.built_in_tools

    def function_tool(self, name: str) -> FunctionTool | None:
        """The function tool named ``name``, or ``None``."""
        return next((tool for tool in self.tools if tool.name == name), None)

    def tool_source(self, source_name: str) -> ToolSource | None:
        """The tool source named ``source_name``, or ``None``."""
        return next((s for s in self.tool_sources if s.source_name == source_name), None)

    def model_for(self, session_settings: Mapping[str, Any]) -> ModelClient:
        """The ``ModelClient`` of a model call with these session settings.

        Raises ``TypeError`` when ``resolve_model`` returns something else, such as
        ``None`` from ``models.get(name)`` for a name the Worker has no client for.
        The message names the agent and the type, never the settings: it becomes
        the turn's ``last_turn_error``, which snapshots show.
        """
        if self.resolve_model is None:
            return self.model
        client: object = self.resolve_model(session_settings)
        if not isinstance(client, ModelClient):
            raise TypeError(
                f"resolve_model of agent {self.name} returned {type(client).__name__}, "
                "not a ModelClient"
            )
        return client

    def instructions_for(self, context: InstructionContext) -> str:
        """The instructions of one model call."""
        if isinstance(self.instructions, str):
            return self.instructions
        text = self.instructions(context)
        if not isinstance(text, str):
            raise TypeError(
                f"the instructions function of agent {self.name} returned "
                f"{type(text).__name__}, not a string"
            )
        return text
