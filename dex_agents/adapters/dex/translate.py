"""Port options, waits and decisions as Dex ones, and Dex wait results back as port ones.

Every function here is a pure mapping between two declarative models; the Steps
in ``dex_steps`` call them. Differences a reader should know:

- Dex counts timeouts in whole seconds, so a port timeout rounds up (at least 1 s).
- A port ``StepOptions`` always states a retry policy; Dex gets it field by field.
- A port failure route becomes ``on_execute_failure_proceed_to`` with the
  failure Step's own options restated, since a Dex movement never merges options.
- The wait's conditions are recorded in a Step-execution local, so the execute
  phase can say which condition ended the wait, as the port's ``WaitResult`` does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import dex

from dex_agents.adapters.dex.schema import DexSchema, map_loads
from dex_agents.adapters.dex.wire_values import from_dex, to_dex
from dex_agents.domain.canonical_json import dumps
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import (
    DecisionKind,
    RetryPolicy,
    Step,
    StepDecision,
    StepDurability,
    StepMovement,
    StepOptions,
)
from dex_agents.ports.persistence import ChannelDef, ChannelMapDef
from dex_agents.ports.step_waits import ChannelCondition, TimerCondition, Wait, WaitResult

DexStepClass = type[dex.Step[Any]]
StepLookup = Callable[[type[Step[Any]]], DexStepClass]
"""Finds the Dex Step class registered for a port Step class."""

OptionsLookup = Callable[[type[Step[Any]]], StepOptions]
"""Finds a port Step class's static options."""

WAIT_LOCAL_KEY = "dex_agents.wait"
"""The Step-execution local that carries a wait's conditions from wait_for to execute."""


def whole_seconds(value: timedelta) -> timedelta:
    """A duration rounded up to whole seconds, at least one: Dex's unit for timeouts."""
    return timedelta(seconds=max(1, math.ceil(value.total_seconds())))


def dex_retry(retry: RetryPolicy) -> dex.RetryPolicy:
    """A port retry policy as Dex's, field by field, its durations in whole seconds.

    The SDK takes whole seconds only (it raises for 500 ms), so each duration is
    rounded up, at least one second, as timeouts are.
    """
    return dex.RetryPolicy(
        initial_interval=whole_seconds(retry.initial_interval),
        backoff_coefficient=retry.backoff_coefficient,
        maximum_interval=whole_seconds(retry.maximum_interval),
        maximum_attempts=retry.maximum_attempts,
        total_duration=None
        if retry.total_duration is None
        else whole_seconds(retry.total_duration),
    )


def dex_durability(durability: StepDurability) -> dex.StepDurability:
    """SYNC stays SYNC, so a ``FlowConfig(step_durability=ASYNC)`` never replays a Step result."""
    return (
        dex.StepDurability.SYNC if durability is StepDurability.SYNC else dex.StepDurability.ASYNC
    )


def dex_options(
    options: StepOptions,
    schema: DexSchema,
    step_class: StepLookup,
    static_options: OptionsLookup,
) -> dex.StepOptions:
    """Port Step options as Dex ``StepOptions``, the failure route's options restated."""
    mapped = _plain_options(options, schema)
    if options.failure_step is None:
        return mapped
    own = static_options(options.failure_step)
    # A failure route's own options are static; the failing Step's movement adds the locks
    # of the instance its input stands for.
    locks = own.locks + tuple(lock for lock in options.failure_locks if lock not in own.locks)
    failure = _plain_options(replace(own, locks=locks), schema)
    return mapped.on_execute_failure_proceed_to(step_class(options.failure_step), failure)


def _plain_options(options: StepOptions, schema: DexSchema) -> dex.StepOptions:
    whole, instances = map_loads(schema, options.loads)
    wait_whole, wait_instances = map_loads(schema, options.wait_loads)
    durability = dex_durability(options.durability)
    return dex.StepOptions(
        execute_method_timeout=whole_seconds(options.execute_timeout),
        heartbeat_timeout=whole_seconds(options.heartbeat_timeout),
        execute_retry=dex_retry(options.retry),
        wait_for_durability=durability,
        execute_durability=durability,
        execute_lock_attributes=tuple(schema.lock(lock) for lock in options.locks),
        execute_load_attribute_maps=whole,
        execute_load_attribute_map_instances=instances,
        wait_for_load_attribute_maps=wait_whole,
        wait_for_load_attribute_map_instances=wait_instances,
    )


# ---------------------------------------------------------------------------
# Waits


def _dex_condition(condition: ChannelCondition | TimerCondition, schema: DexSchema) -> Any:
    if isinstance(condition, TimerCondition):
        return dex.Timer.by_duration(
            timedelta(seconds=math.ceil(condition.duration.total_seconds()))
        )
    if isinstance(condition.channel, ChannelMapDef):
        assert condition.key is not None  # ChannelCondition enforces a key for a map
        definition = schema.channel_map(condition.channel)
        return definition.for_n(condition.key, condition.count)
    return schema.channel(condition.channel).for_n(condition.count)


def dex_wait(wait: Wait, schema: DexSchema) -> dex.Wait:
    """A port wait as a Dex one: skip, one condition, or the first ready of several."""
    conditions = [_dex_condition(condition, schema) for condition in wait.conditions]
    if not conditions:
        return dex.Wait.skip_immediately()
    if len(conditions) == 1:
        return dex.Wait.until(conditions[0])
    return dex.Wait.any_of(*conditions)


def describe_wait(wait: Wait) -> str:
    """The wait's conditions as JSON text, for the execute phase (``WAIT_LOCAL_KEY``)."""
    described: list[dict[str, Any]] = []
    for condition in wait.conditions:
        if isinstance(condition, TimerCondition):
            described.append({"timer": True})
        else:
            described.append({"channel": condition.channel.name, "key": condition.key})
    return dumps(described)


def read_wait_result(
    description: str | None, context: dex.Context, schema: DexSchema
) -> WaitResult:
    """Which recorded condition ended the wait, and the messages it consumed.

    Dex reports fired Timers by their index among the wait's Timers, and a
    Channel condition's consumed messages through ``results``; only the
    selected condition has any.
    """
    if not description:
        return WaitResult()
    timer_index = 0
    for index, condition in enumerate(json.loads(description)):
        if condition.get("timer"):
            if context.has_timer_fired(timer_index):
                return WaitResult(condition_index=index, timer_fired=True)
            timer_index += 1
            continue
        declaration = schema.declaration(condition["channel"])
        if isinstance(declaration, ChannelMapDef):
            raw = schema.channel_map(declaration).results(context, condition["key"])
        elif isinstance(declaration, ChannelDef):
            raw = schema.channel(declaration).results(context)
        else:
            raise LookupError(f"{condition['channel']} is not a Channel or ChannelMap")
        if raw:
            messages = tuple(from_dex(declaration.value_type, value) for value in raw)
            return WaitResult(condition_index=index, messages=messages)
    return WaitResult()


# ---------------------------------------------------------------------------
# Decisions


def dex_movement(
    movement: StepMovement,
    schema: DexSchema,
    step_class: StepLookup,
    static_options: OptionsLookup,
    input_type: Callable[[type[Step[Any]]], Any],
) -> dex.StepMovement[Any]:
    """One port movement as a Dex movement, its per-movement options mapped."""
    options = (
        None
        if movement.options is None
        else dex_options(movement.options, schema, step_class, static_options)
    )
    value = to_dex(input_type(movement.step), movement.input)
    return dex.StepMovement.of(step_class(movement.step), value, options=options)


def dex_decision(
    decision: StepDecision,
    schema: DexSchema,
    step_class: StepLookup,
    static_options: OptionsLookup,
    input_type: Callable[[type[Step[Any]]], Any],
) -> dex.StepDecision:
    """A port decision as Dex's, with its flow-wide cancellations."""
    if decision.kind is DecisionKind.GO:
        movements = [
            dex_movement(movement, schema, step_class, static_options, input_type)
            for movement in decision.movements
        ]
        mapped = dex.go_to_many(*movements)
    elif decision.kind is DecisionKind.END:
        mapped = dex.dead_end()
    elif decision.kind is DecisionKind.COMPLETE:
        mapped = (
            dex.force_complete()
            if decision.output is None
            else dex.force_complete(to_json(decision.output))
        )
    else:
        mapped = dex.force_fail(decision.reason or "the Step failed the Flow")
    if decision.canceling_steps:
        mapped = mapped.with_canceling_steps(
            *(step_class(step) for step in decision.canceling_steps)
        )
    return mapped
