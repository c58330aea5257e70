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
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
    StateReader,
    StateTransaction,
    StreamDef,
)

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")
T = TypeVar("T")

# ---------------------------------------------------------------------------
# Wait conditions


@dataclass(frozen=True)
class ChannelCondition:
    """Wait until ``count`` messages wait in a Channel (``key`` ``None``) or one
    ChannelMap instance, then consume exactly ``count`` of them, oldest first."""

    channel: ChannelDef[Any] | ChannelMapDef[Any]
    count: int = 1
    key: str | None = None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"a channel condition waits for at least 1 message, not {self.count}")
        if isinstance(self.channel, ChannelMapDef) != (self.key is not None):
            raise ValueError(
                f"{self.channel.name}: a ChannelMap condition needs an instance key, "
                "and a Channel condition takes none"
            )


@dataclass(frozen=True)
class TimerCondition:
    """Wait until ``duration`` has passed since the wait began. A zero Timer fires at once."""

    duration: timedelta

    def __post_init__(self) -> None:
        if self.duration < timedelta(0):
            raise ValueError(f"a timer duration cannot be negative: {self.duration}")


Condition = ChannelCondition | TimerCondition


def for_one(channel: ChannelDef[Any]) -> ChannelCondition:
    """Wait for one message of a Channel."""
    return ChannelCondition(channel, 1)


def for_n(channel: ChannelDef[Any], count: int) -> ChannelCondition:
    """Wait for ``count`` messages of a Channel."""
    return ChannelCondition(channel, count)


def for_one_in(channel_map: ChannelMapDef[Any], key: str) -> ChannelCondition:
    """Wait for one message of one ChannelMap instance."""
    return ChannelCondition(channel_map, 1, key)


def timer(duration: timedelta) -> TimerCondition:
    """Wait for a durable Timer."""
    return TimerCondition(duration)


@dataclass(frozen=True)
class Wait:
    """What a Step's wait phase waits on: the first of ``conditions`` to be ready.

    When several are ready at once, Timers win, then Channels in argument order,
    as in Dex. Only the selected Channel condition consumes messages. An empty
    ``conditions`` skips the wait.
    """

    conditions: tuple[Condition, ...]

    @classmethod
    def until(cls, condition: Condition) -> Wait:
        """Wait for one condition."""
        return cls((condition,))

    @classmethod
    def any_of(cls, *conditions: Condition) -> Wait:
        """Wait for the first ready condition."""
        if not conditions:
            raise ValueError("Wait.any_of needs at least one condition")
        return cls(tuple(conditions))

    @classmethod
    def skip(cls) -> Wait:
        """Run execute at once."""
        return cls(())


@dataclass(frozen=True)
class WaitResult:
    """Which condition ended the wait, and the messages it consumed."""

    condition_index: int | None = None
    timer_fired: bool = False
    messages: tuple[Any, ...] = ()


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
        seconds = self.initial_interval.total_seconds() * self.backoff_coefficient**exponent
        return min(timedelta(seconds=seconds), self.maximum_interval)


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
# Contexts


class AttemptProgress(StrEnum):
    """How far the last failed attempt got before the failure route ran."""

    NOT_STARTED = "not_started"
    NOT_COMPLETED = "not_completed"


@dataclass(frozen=True)
class RecoveryError:
    """Why a Step's attempts failed, as its failure route sees it.

    ``attempt_progress`` is ``NOT_STARTED`` only when no attempt ever reached the
    Step's code, so its effects never happened.
    """

    detail: str
    error_type: str
    attempt_progress: AttemptProgress = AttemptProgress.NOT_COMPLETED


class WaitContext(Protocol):
    """What a Step's wait phase sees: a read-only view of committed state."""

    @property
    def flow_id(self) -> str:
        """The session ID."""
        ...

    @property
    def step_execution_id(self) -> str:
        """``<StepType>-<n>``, shared by every attempt of this Step execution."""
        ...

    @property
    def now(self) -> datetime:
        """The engine's clock (UTC) when the wait phase runs; Timers count from it."""
        ...

    @property
    def state(self) -> StateReader:
        """Committed state, with the Step's ``wait_loads``."""
        ...


class StepContext(Protocol):
    """What a Step's execute phase sees and does. Do not keep it after the handler returns.

    An engine that knows the Flow run ID also gives its context a ``run_id``
    property (a ``str``); it is optional, so read it with ``step_run_id``.
    """

    @property
    def flow_id(self) -> str:
        """The session ID."""
        ...

    @property
    def step_type(self) -> str:
        """The Step's type."""
        ...

    @property
    def step_execution_id(self) -> str:
        """``<StepType>-<n>``, shared by every attempt of this Step execution."""
        ...

    @property
    def attempt(self) -> int:
        """The one-based attempt number."""
        ...

    @property
    def first_attempt_at(self) -> datetime:
        """When the first attempt of this Step execution started (UTC)."""
        ...

    @property
    def now(self) -> datetime:
        """The engine's clock (UTC) when this attempt started."""
        ...

    @property
    def state(self) -> StateTransaction:
        """State as committed when the attempt started; writes commit with the result."""
        ...

    @property
    def wait_result(self) -> WaitResult:
        """Which wait condition ended the wait, and the messages it consumed."""
        ...

    @property
    def recovery_error(self) -> RecoveryError | None:
        """Set only in a failure route Step: why the routed Step failed."""
        ...

    @property
    def last_heartbeat_value(self) -> str | None:
        """The checkpoint an earlier attempt of this execution saved with ``heartbeat``."""
        ...

    async def heartbeat(self, checkpoint: str | None = None, *, durable: bool = True) -> None:
        """Record liveness durably; a ``checkpoint`` is kept for the next attempt.

        The first heartbeat or stream event marks the attempt started: from then
        on a lost worker fails the attempt instead of handing it out again.
        ``durable=False`` (only for a Step whose code may safely run twice) lets
        an engine commit the mark without waiting for the disk: a power failure
        may then lose it, and the attempt runs again as one that never started.
        The embedded engine then leaves the pending Stream events to its event
        flush interval, as it does any event. A Dex server records every
        heartbeat itself and ignores the flag.
        """
        ...

    def write_event(self, stream: StreamDef[T], value: T) -> None:
        """Append a Stream event at once, best-effort; it stays even if the attempt fails."""
        ...

    def is_cancellation_requested(self) -> bool:
        """Whether an RPC or a decision cancelled this Step execution."""
        ...


def step_run_id(context: StepContext) -> str | None:
    """The Flow run ID of ``context``'s optional ``run_id`` property, or ``None`` without one.

    The embedded engine and the Dex adapter set it; a context that wraps another
    and leaves it out (or an engine that knows none) gives ``None``.
    """
    run_id = getattr(context, "run_id", None)
    return run_id if isinstance(run_id, str) and run_id else None


class RpcContext(Protocol):
    """What an RPC handler sees and does, in one transaction."""

    @property
    def flow_id(self) -> str:
        """The session ID."""
        ...

    @property
    def now(self) -> datetime:
        """The engine's clock (UTC)."""
        ...

    @property
    def flow_active(self) -> bool:
        """Whether the Flow still runs (a read-only RPC may serve a stopped one)."""
        ...

    @property
    def state(self) -> StateTransaction:
        """The session's state; writes commit atomically with the RPC's result."""
        ...


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
