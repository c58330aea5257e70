"""The Flow types one embedded engine serves, checked once when they are registered."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dex_agents.adapters.local.codec import SchemaItem, decode_options
from dex_agents.adapters.local.history_retention import (
    DEFAULT_STEP_HISTORY_LIMIT,
    check_step_history_limit,
)
from dex_agents.domain.wire import from_json
from dex_agents.ports.engine import FlowDefinition, Rpc, Step, StepOptions
from dex_agents.ports.errors import FlowDefinitionError
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
)

_DECODED_OPTIONS_KEPT = 256
"""Movement options texts one Flow type keeps decoded; all are dropped when it is full."""


@dataclass(frozen=True)
class RegisteredFlow:
    """One Flow type with its Steps and schema by name."""

    flow: FlowDefinition
    steps: dict[str, Step[Any]]
    schema: dict[str, SchemaItem]
    own_options: dict[str, StepOptions]
    """Each Step type's static options, read and checked once at registration
    (``register_flows``)."""
    step_history_limit: int | None = DEFAULT_STEP_HISTORY_LIMIT
    """The finished Step executions each session keeps (``history_retention.py``)."""
    retry_interval_scale: float = 1.0
    """What each retry policy's interval is multiplied by (``check_retry_interval_scale``)."""
    _decoded_options: dict[str, StepOptions] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def flow_type(self) -> str:
        """The Flow type's name."""
        return self.flow.flow_type

    @functools.cached_property
    def singleton_names(self) -> tuple[str, ...]:
        """The names of the schema's singleton Attributes."""
        return tuple(name for name, item in self.schema.items() if isinstance(item, AttributeDef))

    @functools.cached_property
    def write_once_map_names(self) -> frozenset[str]:
        """The names of the schema's ``write_once`` AttributeMaps."""
        return frozenset(
            name
            for name, item in self.schema.items()
            if isinstance(item, AttributeMapDef) and item.write_once
        )

    def step(self, step_type: str) -> Step[Any]:
        """The registered Step of a type."""
        try:
            return self.steps[step_type]
        except KeyError:
            raise FlowDefinitionError(
                f"Flow type {self.flow_type} has no Step {step_type}"
            ) from None

    def step_of(self, step_class: type[Step[Any]]) -> Step[Any]:
        """The registered Step of a class a decision names."""
        step = self.step(step_class.step_type)
        if type(step) is not step_class:
            raise FlowDefinitionError(
                f"Flow type {self.flow_type} registers {type(step).__name__} as "
                f"{step_class.step_type}, not {step_class.__name__}"
            )
        return step

    def options(self, step: Step[Any], movement_options: str | None) -> StepOptions:
        """The options of one execution: its movement's, else the Step's own."""
        if movement_options is None:
            # Static, so read once: every claim, wait and commit runs by the options the
            # registration checked, and none builds them again.
            return self.own_options[step.step_type]
        # A session's movements repeat the same few options, and each execution's are read
        # at its claim, its wait and its commit: decode each text once.
        decoded = self._decoded_options.get(movement_options)
        if decoded is None:
            decoded = decode_options(movement_options, self.steps, self.schema)
            if len(self._decoded_options) >= _DECODED_OPTIONS_KEPT:
                self._decoded_options.clear()
            self._decoded_options[movement_options] = decoded
        return decoded

    def decode_input(self, step: Step[Any], text: str) -> Any:
        """A Step's input from its JSON text."""
        return from_json(text, step.input_type)

    def rpc(self, name: str) -> Rpc[Any, Any]:
        """A registered RPC."""
        try:
            return self.flow.rpcs[name]
        except KeyError:
            raise FlowDefinitionError(f"Flow type {self.flow_type} has no RPC {name}") from None

    def channel(self, name: str) -> ChannelDef[Any] | ChannelMapDef[Any]:
        """A Channel or ChannelMap by name."""
        item = self.schema.get(name)
        if not isinstance(item, ChannelDef | ChannelMapDef):
            raise FlowDefinitionError(f"Flow type {self.flow_type} has no Channel {name}")
        return item


def check_retry_interval_scale(scale: object) -> float:
    """``scale`` if it is a number above 0 and at most 1; else ``ValueError`` naming it.

    The engine multiplies each retry policy's interval by it: 1 (the default)
    waits each interval as the policy says, and a test's smaller scale waits
    less, with the same attempts in the same order. A ``RetryAfterError``'s
    delay and the policy's ``total_duration`` stay as given.
    """
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not 0 < scale <= 1  # also refuses NaN
    ):
        raise ValueError(f"retry_interval_scale must be above 0 and at most 1, not {scale!r}")
    return float(scale)


def register_flows(
    flows: Sequence[FlowDefinition],
    *,
    step_history_limit: int | None = DEFAULT_STEP_HISTORY_LIMIT,
    retry_interval_scale: float = 1.0,
) -> dict[str, RegisteredFlow]:
    """Check and index Flow types; ``FlowDefinitionError`` names the first problem."""
    check_step_history_limit(step_history_limit)
    check_retry_interval_scale(retry_interval_scale)
    registered: dict[str, RegisteredFlow] = {}
    for flow in flows:
        if flow.flow_type in registered:
            raise FlowDefinitionError(f"Flow type {flow.flow_type} is registered twice")
        steps: dict[str, Step[Any]] = {}
        for step in flow.steps:
            if step.step_type in steps:
                raise FlowDefinitionError(
                    f"Flow type {flow.flow_type} has two Steps named {step.step_type}"
                )
            steps[step.step_type] = step
        start = flow.start_step
        if start is not None and steps.get(start.step_type) is not start:
            raise FlowDefinitionError(
                f"Flow type {flow.flow_type}: the start Step {start.step_type} is not among its Steps"
            )
        schema: dict[str, SchemaItem] = {}
        for item in flow.schema:
            if not isinstance(item, AttributeDef | AttributeMapDef | ChannelDef | ChannelMapDef):
                raise FlowDefinitionError(
                    f"Flow type {flow.flow_type}: {item!r} is not a declaration"
                )
            if item.name in schema:
                raise FlowDefinitionError(f"Flow type {flow.flow_type} declares {item.name} twice")
            schema[item.name] = item
        if flow.stream is not None and flow.stream.name in schema:
            raise FlowDefinitionError(
                f"Flow type {flow.flow_type} declares {flow.stream.name} twice"
            )
        own_options = {step_type: step.options() for step_type, step in steps.items()}
        for step_type, options in own_options.items():
            _check_options(flow.flow_type, steps[step_type], options, steps, schema)
        for name, rpc in flow.rpcs.items():
            if name != rpc.name:
                raise FlowDefinitionError(f"RPC {rpc.name} is registered as {name}")
        registered[flow.flow_type] = RegisteredFlow(
            flow, steps, schema, own_options, step_history_limit, retry_interval_scale
        )
    return registered


def _check_options(
    flow_type: str,
    step: Step[Any],
    options: StepOptions,
    steps: dict[str, Step[Any]],
    schema: dict[str, SchemaItem],
) -> None:
    # Dex's Registry does not check options against the schema; an embedded engine
    # can, and a mistake found at registration beats one found mid-session.
    where = f"Flow type {flow_type}, Step {step.step_type}"
    if options.failure_step is not None and options.failure_step.step_type not in steps:
        raise FlowDefinitionError(
            f"{where}: failure route {options.failure_step.step_type} is not a Step"
        )
    for lock in (*options.locks, *options.failure_locks):
        if schema.get(lock.attribute.name) is not lock.attribute:
            raise FlowDefinitionError(
                f"{where}: lock on {lock.attribute.name}, which is not declared"
            )
    for load in (*options.loads, *options.wait_loads):
        if schema.get(load.attribute_map.name) is not load.attribute_map:
            raise FlowDefinitionError(
                f"{where}: load of {load.attribute_map.name}, which is not declared"
            )
