"""Function tools of the built-in agent loop: ``@function_tool`` and its call context.

``FunctionTool.invoke`` runs one call in a tool Step: decode the model's JSON,
``prepare_arguments``, the schema check, conversion to the parameters' types, the
function, and its result as a ``ToolExecutionResult`` (``tool_results``).

Errors: arguments that are not JSON, that ``prepare_arguments`` refuses, or that
break the schema raise ``ToolExecutionError`` (``invalid arguments for <tool>:
<reason>``), which the model sees. ``invoke`` wraps no exception of the function,
whatever the effect: a ``ToolExecutionError`` passes through and any other error
propagates unchanged, so the effect's retries and failure status decide (a
``read`` retries, a write records ``outcome_unknown``). A tool that shows its
errors to the model raises ``ToolExecutionError`` itself, only when
``context.effect`` is ``READ`` or ``IDEMPOTENT_WRITE``.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dex_agents.app.builtin_loop.json_schema import convert_json_value, json_schema_for_type
from dex_agents.app.builtin_loop.json_validation import (
    JsonSchemaViolation,
    json_type_name,
    validate_json_value,
)
from dex_agents.app.builtin_loop.schema_shape import check_schema_shape
from dex_agents.app.builtin_loop.tool_arguments import (
    ArgumentsNotDecoded,
    decode_tool_arguments,
)
from dex_agents.app.builtin_loop.tool_results import FunctionToolResult, function_tool_result
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.model_io import ModelToolDefinition
from dex_agents.domain.object_memo import ObjectMemo
from dex_agents.domain.runner_outcomes import ToolExecutionResult, ToolInputRequested
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.event_writer import AgentEventWriter
from dex_agents.ports.media_store import MediaStore
from dex_agents.ports.runner import DeferredToolExecution, Heartbeat

__all__ = [
    "FunctionTool",
    "FunctionToolResult",
    "PrepareArguments",
    "ToolCallContext",
    "function_tool",
]

PrepareArguments = Callable[[Any], Any]
"""Converts the decoded arguments, such as an older argument shape, before the schema check."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, kw_only=True)
class ToolCallContext:
    """What a function tool's parameter typed ``ToolCallContext`` receives.

    ``idempotency_key`` is ``"<flow_id>/<turn_id>/<tool_call_id>"``, the same on
    every attempt. ``input_answers`` are the user's answers to the tool's
    questions, in order. ``effect`` is the call's effect after the tool policies,
    which chose its tool Step; a hand-built context is ``UNCLASSIFIED``.
    ``media_store`` is the runner's media store, or ``None`` when it has none.
    """

    idempotency_key: str
    attempt: int
    flow_id: str
    turn_id: str
    tool_call_id: str
    events: AgentEventWriter
    heartbeat: Heartbeat
    input_answers: tuple[str, ...] = ()
    effect: ToolEffect = ToolEffect.UNCLASSIFIED
    media_store: MediaStore | None = None

    @classmethod
    def for_call(
        cls, call: DeferredToolExecution, media_store: MediaStore | None = None
    ) -> ToolCallContext:
        """The context of the tool Step's call ``call``, with the runner's ``media_store``."""
        return cls(
            idempotency_key=call.idempotency_key,
            attempt=call.attempt,
            flow_id=call.flow_id,
            turn_id=call.turn_id,
            tool_call_id=call.tool_call.tool_call_id,
            events=call.events,
            heartbeat=call.heartbeat,
            input_answers=tuple(call.input_answers),
            effect=call.effect,
            media_store=media_store,
        )


@dataclass(frozen=True)
class _Parameter:
    name: str
    hint: object
    positional_only: bool
    required: bool
    receives_context: bool
    default: object = None


@dataclass(frozen=True, kw_only=True)
class FunctionTool:
    """A plain function as a tool of the built-in loop; ``@function_tool`` builds it.

    ``parameters_schema`` is the JSON Schema of the arguments that the model sees
    and ``invoke`` checks. ``effect`` and ``requires_approval`` form the tool's
    ``policy()``.
    """

    name: str
    description: str
    parameters_schema: Mapping[str, Any]
    effect: ToolEffect
    requires_approval: bool | None
    function: Callable[..., Any]
    prepare_arguments: PrepareArguments | None = None
    _parameters: tuple[_Parameter, ...] = field(default=(), repr=False)
    _schema_derived: bool = field(default=True, repr=False)

    def policy(self) -> ToolPolicy:
        """The tool's ``ToolPolicy(effect, requires_approval)``."""
        return ToolPolicy(self.effect, self.requires_approval)

    def definition(self) -> ModelToolDefinition:
        """The tool as the model sees it: name, description and arguments' schema.

        Made once per tool object: model calls share it, as they share a listed tool's
        (``model_tool_definition``), and a model client must not change it.
        """
        return _DEFINED.get(self, _define)

    def _invalid(self, reason: str) -> ToolExecutionError:
        return ToolExecutionError(f"invalid arguments for {self.name}: {reason}")

    def _decode(self, arguments_json: str) -> Any:
        try:
            decoded = decode_tool_arguments(arguments_json)
        except ArgumentsNotDecoded as error:
            raise self._invalid(str(error)) from None
        if self.prepare_arguments is None:
            return decoded
        try:
            prepared = self.prepare_arguments(decoded)
        except Exception as error:
            raise self._invalid(str(error) or type(error).__name__) from error
        if inspect.isawaitable(prepared):
            if inspect.iscoroutine(prepared):
                prepared.close()  # Closed, a coroutine that never runs warns about nothing.
            raise self._invalid("prepare_arguments returned an awaitable; it must be synchronous")
        return prepared

    def _drop_absent_nulls(self, arguments: Any) -> Any:
        # Strict-schema providers send null for an optional argument they leave out.
        if not self._schema_derived or not isinstance(arguments, dict):
            return arguments
        properties = self.parameters_schema.get("properties", {})
        kept = dict(arguments)
        for parameter in self._parameters:
            schema = properties.get(parameter.name, {})
            if not parameter.required and kept.get(parameter.name, 0) is None:
                try:
                    validate_json_value(None, schema)
                except JsonSchemaViolation:
                    del kept[parameter.name]
        return kept

    def _call_arguments(
        self, arguments: Mapping[str, Any], context: ToolCallContext
    ) -> tuple[list[Any], dict[str, Any]]:
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for parameter in self._parameters:
            if parameter.receives_context:
                value: Any = context
            elif parameter.name in arguments:
                try:
                    value = convert_json_value(arguments[parameter.name], parameter.hint)
                except (TypeError, ValueError, OverflowError) as error:
                    # OverflowError: a whole number past float's range for a float.
                    raise self._invalid(f"{parameter.name}: {error}") from error
            elif parameter.required:
                raise self._invalid(f"arguments: missing required property {parameter.name}")
            elif parameter.positional_only:
                # Passed by position, an absent argument keeps its slot with its default,
                # or the next positional-only argument would take its place.
                value = parameter.default
            else:
                continue
            if parameter.positional_only:
                positional.append(value)
            else:
                keywords[parameter.name] = value
        known = {parameter.name for parameter in self._parameters}
        for name in arguments:
            if name not in known:
                raise self._invalid(f"arguments: unexpected property {name}")
        return positional, keywords

    async def invoke(
        self, arguments_json: str, context: ToolCallContext
    ) -> ToolExecutionResult | ToolInputRequested:
        """Run one call with the model's ``arguments_json``; see the module docstring.

        A ``str`` result is the output, a ``FunctionToolResult`` adds its images
        (checked with ``validate_image_references``; ``ToolExecutionError`` when
        ``context.media_store`` is ``None``), a ``ToolInputRequested`` asks the
        user, and any other result is serialized as JSON. A sync function runs in a
        worker thread.
        """
        arguments = self._drop_absent_nulls(self._decode(arguments_json))
        try:
            validate_json_value(arguments, self.parameters_schema)
        except JsonSchemaViolation as violation:
            raise self._invalid(str(violation)) from None
        if not isinstance(arguments, Mapping):
            raise self._invalid(f"arguments: expected object, got {json_type_name(arguments)}")
        positional, keywords = self._call_arguments(arguments, context)
        if inspect.iscoroutinefunction(self.function):
            result = await self.function(*positional, **keywords)
        else:
            result = await asyncio.to_thread(self.function, *positional, **keywords)
            if inspect.isawaitable(result):
                result = await result
        return function_tool_result(self.name, result, context.media_store)


def _is_context_hint(hint: object) -> bool:
    # ToolCallContext | None too, so the function can be called without a context
    # outside a tool Step; derived as a schema it would fail on the event writer.
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return members == [ToolCallContext]
    return hint is ToolCallContext


def _parameters(function: Callable[..., Any], tool: str, derive: bool) -> tuple[_Parameter, ...]:
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as error:
        raise TypeError(
            f"tool {tool}: cannot resolve the type hints of its function: {error}"
        ) from error
    parameters: list[_Parameter] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            stars = "*" if parameter.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            raise TypeError(f"tool {tool}: parameter {stars}{parameter.name} is not supported")
        if derive and parameter.name not in hints:
            raise TypeError(f"tool {tool}: parameter {parameter.name} has no type hint")
        hint = hints.get(parameter.name, Any)
        parameters.append(
            _Parameter(
                name=parameter.name,
                hint=hint,
                positional_only=parameter.kind is inspect.Parameter.POSITIONAL_ONLY,
                required=parameter.default is inspect.Parameter.empty,
                receives_context=_is_context_hint(hint),
                default=parameter.default,
            )
        )
    return tuple(parameters)


def _derived_schema(parameters: tuple[_Parameter, ...], tool: str) -> dict[str, Any]:
    arguments = [parameter for parameter in parameters if not parameter.receives_context]
    return {
        "type": "object",
        "properties": {
            parameter.name: json_schema_for_type(
                parameter.hint, where=f"tool {tool}: parameter {parameter.name}"
            )
            for parameter in arguments
        },
        "required": [parameter.name for parameter in arguments if parameter.required],
        "additionalProperties": False,
    }


_DEFINED: ObjectMemo[FunctionTool, ModelToolDefinition] = ObjectMemo()


def _define(tool: FunctionTool) -> ModelToolDefinition:
    # A deep copy every model call cost about 0.5% of a tool turn. The copy, made once,
    # still keeps the schema that ``invoke`` checks apart from the one the model is sent.
    return ModelToolDefinition(
        name=tool.name,
        description=tool.description,
        parameters_schema=copy.deepcopy(dict(tool.parameters_schema)),
    )


def _json_schema_copy(schema: Mapping[str, Any], tool: str) -> dict[str, Any]:
    # A set or NaN inside was taken here and failed every turn in the model call, with
    # "Object of type set is not JSON serializable", naming no tool.
    try:
        json.dumps(dict(schema), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise TypeError(f"tool {tool}: parameters_schema is not JSON: {error}") from error
    try:
        check_schema_shape(schema)
    except ValueError as error:
        raise ValueError(f"tool {tool}: parameters_schema {error}") from None
    return copy.deepcopy(dict(schema))


def function_tool(
    *,
    effect: ToolEffect | str,
    requires_approval: bool | None = None,
    name: str | None = None,
    description: str | None = None,
    parameters_schema: Mapping[str, Any] | None = None,
    prepare_arguments: PrepareArguments | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a plain sync or async function into a ``FunctionTool``.

    The name defaults to the function name (1 to 64 letters, digits, ``_`` or
    ``-``), the description to the docstring, and the JSON Schema to one derived
    from the type hints (see ``json_schema_for_type``): one property per
    parameter, ``required`` listing those without defaults, and
    ``additionalProperties`` ``false``. A parameter typed ``ToolCallContext`` is
    not in the schema and receives the call's context. An unsupported type raises
    ``TypeError`` here, naming the parameter and the type, and so do a generator
    function, a ``parameters_schema`` that is not JSON, and a ``description`` that is
    not a string; with ``parameters_schema`` the hints are not checked, and one that
    breaks the shape the arguments' check reads raises ``ValueError`` naming where
    (``check_schema_shape``).
    ``prepare_arguments`` is a synchronous, deterministic function of the decoded
    arguments that returns the arguments to check, such as an older argument shape
    converted.
    """
    tool_effect = ToolEffect(effect)
    if requires_approval is not None and not isinstance(requires_approval, bool):
        raise TypeError(f"requires_approval must be a bool or None, not {requires_approval!r}")
    if prepare_arguments is not None and inspect.iscoroutinefunction(prepare_arguments):
        raise TypeError(
            "prepare_arguments must be a synchronous function, not a coroutine function"
        )
    if parameters_schema is not None and not isinstance(parameters_schema, Mapping):
        raise TypeError(
            f"parameters_schema must be a JSON Schema mapping, not {type(parameters_schema).__name__}"
        )
    if description is not None and not isinstance(description, str):
        raise TypeError(f"description must be a string or None, not {type(description).__name__}")

    def decorate(function: Callable[..., Any]) -> FunctionTool:
        if not callable(function):
            raise TypeError(f"function_tool decorates a function, not {type(function).__name__}")
        tool_name = name if name is not None else getattr(function, "__name__", "")
        if not isinstance(tool_name, str) or not _TOOL_NAME.fullmatch(tool_name):
            raise ValueError(
                f"tool name {tool_name!r} must be 1 to 64 letters, digits, underscores or hyphens"
            )
        if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
            # Its generator is no result: every call would fail after the Step began.
            raise TypeError(
                f"tool {tool_name}: a generator function cannot be a tool; return the result"
            )
        derive = parameters_schema is None
        parameters = _parameters(function, tool_name, derive)
        schema = (
            _derived_schema(parameters, tool_name)
            if parameters_schema is None
            else _json_schema_copy(parameters_schema, tool_name)
        )
        return FunctionTool(
            name=tool_name,
            description=description if description is not None else inspect.getdoc(function) or "",
            parameters_schema=schema,
            effect=tool_effect,
            requires_approval=requires_approval,
            function=function,
            prepare_arguments=prepare_arguments,
            _parameters=parameters,
            _schema_derived=derive,
        )

    return decorate
