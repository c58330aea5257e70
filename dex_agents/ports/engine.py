"""The engine port: how a durable Flow and its Steps are declared, runtime-neutrally.

It mirrors Dex's programming model, so that Flow code written once runs on the
embedded SQLite engine and, through the Dex adapter, on Dex:

- A **Flow** type declares its Steps, its persistence (``dex_agents.ports.persistence``),
  an event Stream and its RPCs. One Flow run is one session; its ID is the session ID.
- A **Step** may have a wait phase (``wait_for``) that returns the conditions it
  waits on: Channel or ChannelMap messages (one, or ``n``), a Timer, or any of
  several. A wait holds nothing while it waits: no coroutine, lease or thread.
- Its execute phase (``execute``) reads the state it loaded and stages writes;
  the engine commits the writes, the consumed and published messages, the
  stream events, the next Step executions and the Step's own completion in one
  transaction, or nothing at all. It returns a ``StepDecision``: go to one Step,
  go to many in parallel, end this branch, complete or fail the Flow.
- ``StepOptions`` carry the retry policy (attempts, total budget), the attempt
  and heartbeat timeouts, the failure route (a Step that receives the failed
  Step's input and the ``RecoveryError``), locks and AttributeMap loads. A
  ``StepMovement`` may replace them for one movement.
- An **RPC** reads and writes state in one transaction, may take attribute
  locks (a lock a running Step method holds raises ``RpcLockConflictError``),
  start Steps and cancel Steps by type.

Every Step attempt of one Step execution shares its ``step_execution_id``
(``<StepType>-<n>``). An attempt that never reached the Step's code (it sent no
heartbeat or event before its worker died) runs again as the same attempt; one
that did counts as failed (``AttemptProgress.NOT_COMPLETED``).

The wait conditions are in ``dex_agents.ports.step_waits`` and the contexts the
phases and RPC handlers see in ``dex_agents.ports.step_contexts``; this module
holds the declarations: Steps, their options and decisions, RPCs and Flow types.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import StrEnum
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
    StreamDef,
)
from dex_agents.ports.step_contexts import RpcContext, StepContext, WaitContext
from dex_agents.ports.step_waits import Wait

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")

ENGINE_LOGGER = logging.getLogger("dex_agents.engine")
"""Where both engines' adapters log what a reader or Worker skipped or recovered from."""


# ---------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of a Step's execute phase.

    ``maximum_attempts`` counts the first attempt; ``total_duration`` bounds the
    time from the first attempt. The delay before attempt ``n + 1`` is
    ``initial_interval * backoff_coefficient ** (n - 1)``, at most ``maximum_interval``.
    """

    maximum_attempts: int = 3
    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    maximum_interval: timedelta = timedelta(minutes=1)
    total_duration: timedelta | None = None

    def __post_init__(self) -> None:
        if self.maximum_attempts < 1:
            raise ValueError(f"maximum_attempts must be at least 1, not {self.maximum_attempts}")
        if self.backoff_coefficient < 1:
            raise ValueError(
                f"backoff_coefficient must be at least 1, not {self.backoff_coefficient}"
            )

    def delay_before(self, next_attempt: int) -> timedelta:
        """The delay before ``next_attempt`` (2 or more)."""
        exponent = max(next_attempt - 2, 0)
        try:
            seconds = self.initial_interval.total_seconds() * self.backoff_coefficient**exponent
            # Capped before it becomes a timedelta: a long policy's later delays (2 ** 47
            # seconds by attempt 49) are past what one holds, and raised in the commit.
            return min(timedelta(seconds=seconds), self.maximum_interval)
        except OverflowError:
            return self.maximum_interval


@dataclass(frozen=True)
class AttributeLock:
    """A lock on an Attribute, or on one AttributeMap instance (``key``)."""

    attribute: AttributeDef[Any] | AttributeMapDef[Any]
    key: str | None = None

    @property
    def lock_name(self) -> str:
        """The lock's identity within a Flow run."""
        return self.attribute.name if self.key is None else f"{self.attribute.name}/{self.key}"


@dataclass(frozen=True)
class MapLoad:
    """Load one AttributeMap instance (``key``), or the whole map (``key`` ``None``)."""

    attribute_map: AttributeMapDef[Any]
    key: str | None = None


class StepDurability(StrEnum):
    """When a Step's result is persisted. Every session Step says SYNC explicitly."""

    SYNC = "sync"
    ASYNC = "async"


@dataclass(frozen=True)
class StepOptions:
    """A Step's timeouts, retries, failure route, locks and loads.

    ``execute_timeout`` bounds one attempt; ``heartbeat_timeout`` the time between
    heartbeats of a started attempt. ``failure_step`` receives the failed Step's
    input once its retries are spent, with ``StepContext.recovery_error`` set.
    ``locks`` are held from the start of an execute attempt to its commit.
    ``failure_locks`` are held by the failure route's execute as well as its own
    locks: a failure route's options are static, so only the failing Step's
    movement can name the instance its input stands for (a tool call's record).
    ``loads`` name the AttributeMap instances (or whole maps) execute can read.
    """

    execute_timeout: timedelta = timedelta(hours=2)
    heartbeat_timeout: timedelta = timedelta(minutes=1)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    failure_step: type[Step[Any]] | None = None
    locks: tuple[AttributeLock, ...] = ()
    loads: tuple[MapLoad, ...] = ()
    wait_loads: tuple[MapLoad, ...] = ()
    durability: StepDurability = StepDurability.SYNC
    failure_locks: tuple[AttributeLock, ...] = ()

    def with_failure_route(self, step: type[Step[Any]]) -> StepOptions:
        """A copy that routes to ``step`` once execute retries are spent."""
        return replace(self, failure_step=step)


# ---------------------------------------------------------------------------
# Decisions


@dataclass(frozen=True)
class StepMovement:
    """Start ``step`` with ``input``; ``options``, when set, replace the Step's own options."""

    step: type[Step[Any]]
    input: Any = None
    options: StepOptions | None = None


class DecisionKind(StrEnum):
    """What a Step decided."""

    GO = "go"
    END = "end"
    COMPLETE = "complete"
    FAIL = "fail"


@dataclass(frozen=True)
class StepDecision:
    """What a Step's execute phase decided, with the Step types it cancels flow-wide."""

    kind: DecisionKind
    movements: tuple[StepMovement, ...] = ()
    output: Any = None
    reason: str | None = None
    canceling_steps: tuple[type[Step[Any]], ...] = ()

    def with_canceling_steps(self, *steps: type[Step[Any]]) -> StepDecision:
        """Also cancel every active execution of these Step types when this decision commits."""
        return replace(self, canceling_steps=self.canceling_steps + steps)


def go_to(step: type[Step[Any]], input: Any = None) -> StepDecision:
    """Move to one Step."""
    return StepDecision(DecisionKind.GO, (StepMovement(step, input),))


def go_to_many(*movements: StepMovement) -> StepDecision:
    """Move to several Steps, which run in parallel."""
    return StepDecision(DecisionKind.GO, tuple(movements))


def dead_end() -> StepDecision:
    """End this branch; the Flow keeps running (it may wait for RPCs)."""
    return StepDecision(DecisionKind.END)


def complete(output: Any = None) -> StepDecision:
    """Complete the Flow now."""
    return StepDecision(DecisionKind.COMPLETE, output=output)


def fail(reason: str) -> StepDecision:
    """Fail the Flow now, with no retry."""
    return StepDecision(DecisionKind.FAIL, reason=reason)


# ---------------------------------------------------------------------------
# Declarations


class Step(ABC, Generic[InputT]):
    """A Step type of a Flow. Subclass it; the class name is the Step type by default.

    ``input_type`` is the wire type of the Step's input (``type(None)`` for none).
    A Step without ``wait_for`` runs its execute phase at once.

    ``state_only`` says that execute only reads and stages state: it does no
    I/O, sends no heartbeat and never suspends, so whatever runs it may do so
    in the commit that made it runnable (the embedded engine does; on Dex it is
    a task like any other). Every attempt of it still counts and commits as
    its own Step execution.
    """

    step_type: ClassVar[str] = ""
    input_type: ClassVar[Any] = type(None)
    state_only: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("step_type"):
            cls.step_type = cls.__name__

    def options(self) -> StepOptions:
        """The Step's static options; a ``StepMovement`` may replace them."""
        return StepOptions()

    def has_wait(self) -> bool:
        """Whether the Step overrides ``wait_for``."""
        return type(self).wait_for is not Step.wait_for

    async def wait_for(self, context: WaitContext, input: InputT) -> Wait:
        """The conditions this execution waits on; by default none."""
        return Wait.skip()

    @abstractmethod
    async def execute(self, context: StepContext, input: InputT) -> StepDecision:
        """Read state, act, stage writes, and decide what runs next."""


@dataclass(frozen=True)
class RpcResult(Generic[OutputT]):
    """An RPC's output, the Steps it starts and the Step types it cancels, applied atomically."""

    output: OutputT
    next_steps: tuple[StepMovement, ...] = ()
    canceling_steps: tuple[type[Step[Any]], ...] = ()


@dataclass(frozen=True)
class Rpc(Generic[InputT, OutputT]):
    """An RPC of a Flow type: a synchronous handler run in one transaction.

    ``locks`` are taken for the transaction; one that a running Step method holds
    raises ``RpcLockConflictError``. ``loads`` name the AttributeMap instances (or
    whole maps) the handler can read, and ``channel_loads`` the Channels whose
    waiting messages it lists (``pending_messages``) or deletes. A handler that writes nothing, takes no
    lock and is not ``is_transactional`` may serve a stopped session.
    """

    name: str
    input_type: Any
    output_type: Any
    handler: Callable[[RpcContext, InputT], RpcResult[OutputT]]
    locks: tuple[AttributeLock, ...] = ()
    loads: tuple[MapLoad, ...] = ()
    is_transactional: bool = False
    channel_loads: tuple[ChannelDef[Any], ...] = ()


class FlowDefinition(Protocol):
    """A Flow type: its Steps, persistence, Stream and RPCs."""

    @property
    def flow_type(self) -> str:
        """The Flow type's name; one per agent."""
        ...

    @property
    def start_step(self) -> Step[Any] | None:
        """The Step a new Flow run starts with."""
        ...

    @property
    def steps(self) -> Sequence[Step[Any]]:
        """Every Step of the Flow type, the start Step included."""
        ...

    @property
    def schema(
        self,
    ) -> Sequence[AttributeDef[Any] | AttributeMapDef[Any] | ChannelDef[Any] | ChannelMapDef[Any]]:
        """Every Attribute, AttributeMap, Channel and ChannelMap of a run."""
        ...

    @property
    def stream(self) -> StreamDef[Any] | None:
        """The Flow type's event Stream, if it has one."""
        ...

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        """The Flow type's RPCs by name."""
        ...


Heartbeat = Callable[[], Awaitable[None]]
"""An async callable that records liveness."""
