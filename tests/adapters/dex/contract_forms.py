"""Normal forms the engine contract reduces both engines' commits to, and Dex replay inputs.

The embedded engine stores JSON text; Dex carries primitives natively and the
rest as the same JSON text. Each function here maps one side's record (a port
decision, a Dex ``ExecuteOutcome``, ...) to plain data, so the contract compares
like with like.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from dex_agents import AgentSessionFlow
from dex_agents.adapters.dex.wire_values import is_native, to_dex
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import DecisionKind, StepDecision, StepMovement, StepOptions
from dex_agents.ports.persistence import ChannelMapDef
from dex_agents.ports.step_waits import ChannelCondition, TimerCondition, Wait
from tests.adapters.dex.fake_dex_driver import (
    DELETED,
    ExecuteOutcome,
    Movement,
    RpcOutcome,
    WaitSpec,
)
from tests.adapters.dex.session_recording import RecordedExecution


def declared(flow: AgentSessionFlow, name: str) -> Any:
    """The port value type of the declaration named ``name``."""
    return flow.dex_schema.declaration(name).value_type


def json_of(type_hint: Any, carried: Any) -> str | None:
    """A Dex-carried value as the embedded engine's JSON text."""
    if carried is DELETED:
        return None
    return to_json(carried) if is_native(type_hint) else str(carried)


def dex_state(flow: AgentSessionFlow, read: Any) -> dict[str, Any]:
    """What an execution read, as the fake-server driver's state arguments."""

    def carried(name: str, value: Any) -> Any:
        return to_dex(declared(flow, name), value)

    return {
        "attributes": {name: carried(name, value) for name, value in read.attributes.items()},
        "attribute_map_instances": {
            key: None if value is None else carried(key[0], value)
            for key, value in read.instances.items()
        },
        "loaded_attribute_maps": tuple(sorted(read.whole_maps)),
        "channel_sizes": dict(read.channel_sizes),
    }


def port_wait(wait: Wait) -> tuple[list[int], list[tuple[str, str | None, int]]]:
    """A port Wait as (timer seconds, channel conditions)."""
    timers = [
        math.ceil(c.duration.total_seconds())
        for c in wait.conditions
        if isinstance(c, TimerCondition)
    ]
    channels = [
        (c.channel.name, c.key, c.count) for c in wait.conditions if isinstance(c, ChannelCondition)
    ]
    return timers, channels


def dex_wait(spec: WaitSpec | None) -> tuple[list[int], list[tuple[str, str | None, int]]]:
    """A Dex WaitSpec as (timer seconds, channel conditions)."""
    if spec is None:
        return [], []
    timers = [int(t.duration.total_seconds()) for t in spec.timers]
    channels = [(c.channel, c.instance, c.at_least or 0) for c in spec.channels]
    assert all(c.at_least == c.at_most for c in spec.channels)
    return timers, channels


def _whole_seconds(value: timedelta) -> int:
    """A port duration in Dex's unit: whole seconds, rounded up, at least one."""
    return max(1, math.ceil(value.total_seconds()))


def port_options(flow: AgentSessionFlow, options: StepOptions) -> dict[str, Any]:
    """Every option Dex is given, as Dex should carry it.

    Durations in whole seconds (rounded up); loads, wait loads and locks by
    name; the failure route with the failure Step's own options, which a Dex
    movement restates, holding the movement's ``failure_locks`` too.
    """
    retry = options.retry
    failure = None
    if options.failure_step is not None:
        static = port_step_named(flow, options.failure_step.step_type).options()
        extra = tuple(lock for lock in options.failure_locks if lock not in static.locks)
        static = replace(static, locks=static.locks + extra)
        failure = (options.failure_step.step_type, port_options(flow, static))
    return {
        "execute_timeout": _whole_seconds(options.execute_timeout),
        "heartbeat_timeout": _whole_seconds(options.heartbeat_timeout),
        "retry": {
            "initial_interval": _whole_seconds(retry.initial_interval),
            "backoff_coefficient": retry.backoff_coefficient,
            "maximum_interval": _whole_seconds(retry.maximum_interval),
            "maximum_attempts": retry.maximum_attempts,
            "total_duration": (
                None if retry.total_duration is None else _whole_seconds(retry.total_duration)
            ),
        },
        "loads": sorted(f"{load.attribute_map.name}/{load.key or ''}" for load in options.loads),
        "wait_loads": sorted(
            f"{load.attribute_map.name}/{load.key or ''}" for load in options.wait_loads
        ),
        "locks": sorted(lock.lock_name for lock in options.locks),
        "durability": (options.durability.value, options.durability.value),
        "failure": failure,
    }


def dex_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The same fields read from a Dex movement's plain StepOptions."""
    options = options or {}
    retry = options.get("execute_retry_policy", {})
    failure = None
    if "execute_failure_proceed_step_type" in options:
        failure = (
            options["execute_failure_proceed_step_type"],
            dex_options(options.get("execute_failure_proceed_step_options")),
        )

    def durability(key: str) -> str:
        return str(options.get(key, "")).removeprefix("STEP_DURABILITY_").lower()

    return {
        "execute_timeout": options.get("execute_timeout_seconds"),
        "heartbeat_timeout": options.get("heartbeat_timeout_seconds"),
        "retry": {
            "initial_interval": retry.get("initial_interval_seconds"),
            "backoff_coefficient": retry.get("backoff_coefficient"),
            "maximum_interval": retry.get("maximum_interval_seconds"),
            "maximum_attempts": retry.get("maximum_attempts"),
            "total_duration": retry.get("total_duration_seconds"),
        },
        "loads": sorted(options.get("execute_load_attribute_map_instances", [])),
        "wait_loads": sorted(options.get("wait_for_load_attribute_map_instances", [])),
        "locks": sorted(options.get("execute_lock_attribute_keys", [])),
        "durability": (
            durability("wait_for_durability_override"),
            durability("execute_durability_override"),
        ),
        "failure": failure,
    }


def port_decision(flow: AgentSessionFlow, decision: StepDecision) -> dict[str, Any]:
    """A port decision in normal form."""
    kind = {
        DecisionKind.GO: "go_to",
        DecisionKind.END: "dead_end",
        DecisionKind.COMPLETE: "force_complete",
        DecisionKind.FAIL: "force_fail",
    }[decision.kind]
    return {
        "kind": kind,
        "movements": port_movements(flow, decision.movements),
        "canceling": sorted(step.step_type for step in decision.canceling_steps),
    }


def port_movements(
    flow: AgentSessionFlow, movements: Iterable[StepMovement]
) -> list[tuple[str, str | None, dict[str, Any]]]:
    """Port movements in normal form; a movement without options takes the target's."""
    steps = {type(step): step for step in flow.steps}
    normal: list[tuple[str, str | None, dict[str, Any]]] = []
    for movement in movements:
        target = steps[movement.step]
        options = movement.options if movement.options is not None else target.options()
        normal.append((target.step_type, to_json(movement.input), port_options(flow, options)))
    return normal


def dex_movements(
    flow: AgentSessionFlow, movements: Iterable[Movement]
) -> list[tuple[str, str | None, dict[str, Any]]]:
    """Dex movements in normal form."""
    steps = {step.step_type: step for step in flow.steps}
    return [
        (m.step_type, json_of(steps[m.step_type].input_type, m.input), dex_options(m.options))
        for m in movements
    ]


def dex_decision(flow: AgentSessionFlow, outcome: ExecuteOutcome) -> dict[str, Any]:
    """A Dex decision in normal form."""
    decision = outcome.decision
    assert decision is not None, outcome.error
    return {
        "kind": decision.kind.value,
        "movements": dex_movements(flow, decision.movements),
        "canceling": sorted(decision.canceling_step_types),
    }


def dex_writes(
    flow: AgentSessionFlow, outcome: ExecuteOutcome | RpcOutcome
) -> dict[tuple[str, str], str | None]:
    """Dex Attribute writes as the embedded engine's ``(name, key) -> JSON text``."""
    writes = {
        (name, ""): json_of(declared(flow, name), value)
        for name, value in outcome.attribute_writes.items()
    }
    for (name, key), value in outcome.attribute_map_writes.items():
        writes[(name, key)] = json_of(declared(flow, name), value)
    return writes


def dex_publishes(
    flow: AgentSessionFlow, outcome: ExecuteOutcome | RpcOutcome
) -> list[tuple[str, str, str | None]]:
    """Dex publishes as the embedded engine's ``(channel, key, JSON text)``."""
    return [
        (channel, key or "", json_of(declared(flow, channel), value))
        for channel, key, value in outcome.channel_publishes
    ]


def wait_inputs(
    flow: AgentSessionFlow, execution: RecordedExecution
) -> tuple[dict[Any, list[Any]], list[bool] | None]:
    """The Dex condition results that stand for the recorded wait result."""
    if execution.wait is None:
        return {}, None
    result = execution.wait_result
    conditions = execution.wait.wait.conditions
    channel_results: dict[Any, list[Any]] = {}
    timers: list[bool] = []
    for index, condition in enumerate(conditions):
        selected = index == result.condition_index
        if isinstance(condition, TimerCondition):
            timers.append(selected and result.timer_fired)
        elif selected:
            key: Any = (
                (condition.channel.name, condition.key)
                if isinstance(condition.channel, ChannelMapDef)
                else condition.channel.name
            )
            value_type = condition.channel.value_type
            channel_results[key] = [to_dex(value_type, m) for m in result.messages]
    return channel_results, timers or None


def fixed_clock(now: datetime) -> Callable[[], datetime]:
    """A clock that always says ``now``."""
    return lambda: now


def port_step_named(flow: AgentSessionFlow, step_type: str) -> Any:
    """The port Step of ``flow`` with this type."""
    return next(step for step in flow.steps if step.step_type == step_type)
