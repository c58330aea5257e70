"""One Flow type's Dex binding: its schema, a Dex Step class per port Step, and its RPC methods.

Dex finds a Step's input type and a handler's Context kind from annotations,
and a decision's target by class, so the binding makes one ``dex.Step``
subclass per port Step, annotated with the Dex-declared input type and
``AsyncContext``. The Step logic stays the app layer's: each Dex Step only
translates its Context in, calls the port Step, and translates the decision out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import MethodType
from typing import Any

import dex

from dex_agents.adapters.dex.contexts import DexStepContext, DexWaitContext
from dex_agents.adapters.dex.dex_rpcs import make_rpc_handler
from dex_agents.adapters.dex.schema import DexSchema, build_dex_schema
from dex_agents.adapters.dex.state import DexState
from dex_agents.adapters.dex.translate import (
    WAIT_LOCAL_KEY,
    DexStepClass,
    describe_wait,
    dex_decision,
    dex_movement,
    dex_options,
    dex_wait,
    read_wait_result,
)
from dex_agents.adapters.dex.wire_values import dex_type, from_dex
from dex_agents.ports.engine import FlowDefinition, Step, StepMovement, StepOptions
from dex_agents.ports.errors import RetryAfterError


def _utc_now() -> datetime:
    return datetime.now(UTC)


class DexBinding:
    """The Dex form of one port ``FlowDefinition``; build it once per registered Flow."""

    def __init__(
        self, definition: FlowDefinition, clock: Callable[[], datetime] = _utc_now
    ) -> None:
        self.definition = definition
        self.clock = clock
        self.schema: DexSchema = build_dex_schema(definition.schema, definition.stream)
        self._static_dex_options: dict[type[Step[Any]], dex.StepOptions] = {}
        self._port_steps: dict[type[Step[Any]], Step[Any]] = {
            type(step): step for step in definition.steps
        }
        if len(self._port_steps) != len(definition.steps):
            raise ValueError(f"Flow {definition.flow_type} registers one Step class twice")
        self._dex_classes: dict[type[Step[Any]], DexStepClass] = {
            port_class: self._make_step_class(step) for port_class, step in self._port_steps.items()
        }
        self.dex_steps: dict[type[Step[Any]], dex.Step[Any]] = {
            port_class: dex_class() for port_class, dex_class in self._dex_classes.items()
        }

    # -- lookups ------------------------------------------------------------

    def step_class(self, port_class: type[Step[Any]]) -> DexStepClass:
        """The Dex Step class of a port Step class of this Flow."""
        self._port_step(port_class)
        return self._dex_classes[port_class]

    def static_options(self, port_class: type[Step[Any]]) -> StepOptions:
        """A port Step class's own options."""
        return self._port_step(port_class).options()

    def input_type(self, port_class: type[Step[Any]]) -> Any:
        """A port Step class's input type."""
        return self._port_step(port_class).input_type

    def static_dex_options(self, port_class: type[Step[Any]]) -> dex.StepOptions:
        """A port Step class's own options as Dex options, mapped once: the SDK asks per movement."""
        mapped = self._static_dex_options.get(port_class)
        if mapped is None:
            mapped = self.dex_options(self.static_options(port_class))
            self._static_dex_options[port_class] = mapped
        return mapped

    def dex_options(self, options: StepOptions) -> dex.StepOptions:
        """Port options as Dex options, naming this Flow's Step classes and definitions."""
        return dex_options(options, self.schema, self.step_class, self.static_options)

    def step_list(self) -> dex.StepList[Any]:
        """The Flow's Steps for ``dex.Flow.get_steps``, the start Step first."""
        start = self.definition.start_step
        others = [
            step for cls, step in self.dex_steps.items() if start is None or cls is not type(start)
        ]
        if start is None:
            return dex.StepList.without_start_step(*others)
        return dex.StepList.start_step(self.dex_steps[type(start)]).other_steps(*others)

    def rpc_methods(self, owner: object) -> Mapping[str, Callable[..., Any]]:
        """Every RPC as a method bound to ``owner``, the registered ``dex.Flow`` instance."""
        return {
            name: MethodType(make_rpc_handler(rpc, self), owner)
            for name, rpc in self.definition.rpcs.items()
        }

    def movements(self, movements: Sequence[StepMovement]) -> tuple[dex.StepMovement[Any], ...]:
        """Port movements (of an RPC result) as Dex movements of this Flow."""
        return tuple(
            dex_movement(m, self.schema, self.step_class, self.static_options, self.input_type)
            for m in movements
        )

    def cancellations(self, steps: Sequence[type[Step[Any]]]) -> tuple[DexStepClass, ...]:
        """Port Step classes to cancel, as this Flow's Dex classes."""
        return tuple(self.step_class(step) for step in steps)

    def _port_step(self, port_class: type[Step[Any]]) -> Step[Any]:
        try:
            return self._port_steps[port_class]
        except KeyError:
            raise LookupError(
                f"Step {port_class.__name__} is not a Step of Flow {self.definition.flow_type}"
            ) from None

    # -- handlers -----------------------------------------------------------

    async def wait_for(
        self, step: Step[Any], context: dex.AsyncContext, raw_input: Any
    ) -> dex.Wait:
        """Run the port Step's wait phase and record its conditions for execute."""
        value = from_dex(step.input_type, raw_input)
        state = DexState(context, self.schema, step.options().wait_loads, writable=False)
        wait = await step.wait_for(DexWaitContext(context, state, self.clock()), value)
        context.set_step_execution_local(WAIT_LOCAL_KEY, describe_wait(wait))
        return dex_wait(wait, self.schema)

    async def execute(
        self, step: Step[Any], context: dex.AsyncContext, raw_input: Any
    ) -> dex.StepDecision:
        """Run the port Step's execute phase and translate its decision."""
        value = from_dex(step.input_type, raw_input)
        description = context.get_step_execution_local(WAIT_LOCAL_KEY, str)
        wait_result = read_wait_result(description, context, self.schema)
        state = DexState(context, self.schema, step.options().loads)
        step_context = DexStepContext(
            context, state, self.schema, step.step_type, wait_result, self.clock()
        )
        await step_context.mark_entered()
        try:
            decision = await step.execute(step_context, value)
        except RetryAfterError as error:
            # Dex takes whole seconds; rounding up never retries before the wait asked for.
            seconds = max(1, math.ceil(error.delay.total_seconds()))
            raise dex.retry_after(seconds, error.cause) from error.cause
        step_context.flush_staged_events()
        return dex_decision(
            decision, self.schema, self.step_class, self.static_options, self.input_type
        )

    def _make_step_class(self, step: Step[Any]) -> DexStepClass:
        binding = self
        input_hint = dex_type(step.input_type)

        async def execute(
            self: dex.Step[Any], context: dex.AsyncContext, input: Any
        ) -> dex.StepDecision:
            return await binding.execute(step, context, input)

        execute.__annotations__ = {
            "context": dex.AsyncContext,
            "input": input_hint,
            "return": dex.StepDecision,
        }
        namespace: dict[str, Any] = {
            "__doc__": f"The Dex form of the port Step {step.step_type}.",
            "__module__": __name__,
            "__qualname__": step.step_type,
            "execute": execute,
            "get_step_type": lambda self: step.step_type,
            "get_step_options": lambda self: binding.static_dex_options(type(step)),
        }
        if step.has_wait():

            async def wait_for(
                self: dex.Step[Any], context: dex.AsyncContext, input: Any
            ) -> dex.Wait:
                return await binding.wait_for(step, context, input)

            wait_for.__annotations__ = {
                "context": dex.AsyncContext,
                "input": input_hint,
                "return": dex.Wait,
            }
            namespace["wait_for"] = wait_for
        return type(step.step_type, (dex.Step,), namespace)
