"""Record every Step execution of a session on the embedded engine, in a form Dex can replay.

``record_steps(flow)`` wraps each port Step instance of ``flow`` so that, while
the embedded engine runs it, each wait phase and each successful execute attempt
is recorded with what it read (the Attributes, the loaded AttributeMap
instances, the Channel sizes, the wait result, the clock, the attempt) and what
it committed (writes, publishes, Stream events, heartbeats, the decision). A
failed attempt is recorded too, so a failure route's execution can name the
execution it recovers (``StepRecorder.failed_execution``). The contract suite
hands the same inputs to the Dex mapping and compares commits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from dex_agents.adapters.local.staged_state import StagedState
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import FlowDefinition, Rpc, RpcResult, Step, StepDecision, StepMovement
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    StateTransaction,
    StreamDef,
)
from dex_agents.ports.step_contexts import RecoveryError, RpcContext, StepContext, WaitContext
from dex_agents.ports.step_waits import Wait, WaitResult

T = TypeVar("T")


@dataclass(frozen=True)
class ReadState:
    """What a Step method could read: Attribute values, loaded map instances, Channel sizes."""

    attributes: dict[str, Any]
    instances: dict[tuple[str, str], Any]
    whole_maps: frozenset[str]
    channel_sizes: dict[str, int]


@dataclass
class RecordedWait:
    """One wait phase: its input, what it read and the Wait it returned."""

    step_type: str
    step_execution_id: str
    input: Any
    now: datetime
    read: ReadState
    wait: Wait


@dataclass
class RecordedExecution:
    """One successful execute attempt: its inputs and its commit."""

    step_type: str
    step_execution_id: str
    input: Any
    attempt: int
    first_attempt_at: datetime
    now: datetime
    read: ReadState
    wait_result: WaitResult
    last_heartbeat_value: str | None
    recovery_error: RecoveryError | None
    wait: RecordedWait | None
    writes: dict[tuple[str, str], str | None] = field(default_factory=dict)
    publishes: list[tuple[str, str, str]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    heartbeats: list[str | None] = field(default_factory=list)
    decision: StepDecision | None = None


def read_state(flow: FlowDefinition, state: StagedState) -> ReadState:
    """Everything ``state`` can read, before the Step writes anything."""
    attributes: dict[str, Any] = {}
    instances: dict[tuple[str, str], Any] = {}
    sizes: dict[str, int] = {}
    for item in flow.schema:
        if isinstance(item, AttributeDef):
            value = state.get(item)
            if value is not None:
                attributes[item.name] = value
        elif isinstance(item, AttributeMapDef):
            keys = set(state.loaded_instance_keys(item.name))
            if item.name in state.whole_maps:
                keys |= set(state.instance_keys(item))
            for key in sorted(keys):
                instances[(item.name, key)] = state.get_instance(item, key)
        elif isinstance(item, ChannelDef):
            sizes[item.name] = state.channel_size(item)
    return ReadState(attributes, instances, state.whole_maps, sizes)


class _RecordingContext:
    """A ``StepContext`` that records live events and heartbeats, then delegates."""

    def __init__(self, inner: StepContext, record: RecordedExecution) -> None:
        self._inner = inner
        self._record = record

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def state(self) -> StateTransaction:
        return self._inner.state

    async def heartbeat(self, checkpoint: str | None = None, *, durable: bool = True) -> None:
        self._record.heartbeats.append(checkpoint)
        await self._inner.heartbeat(checkpoint, durable=durable)

    def write_event(self, stream: StreamDef[T], value: T) -> None:
        self._record.events.append(to_json(value))
        self._inner.write_event(stream, value)


@dataclass
class RecordedRpc:
    """One RPC transaction: its input, what it read, its output and its commit."""

    name: str
    input: Any
    now: datetime
    read: ReadState
    pending: dict[str, list[tuple[str, Any]]]
    output: Any = None
    writes: dict[tuple[str, str], str | None] = field(default_factory=dict)
    publishes: list[tuple[str, str, str]] = field(default_factory=list)
    deleted_messages: list[str] = field(default_factory=list)
    next_steps: tuple[StepMovement, ...] = ()
    canceling_steps: tuple[type[Step[Any]], ...] = ()


@dataclass(frozen=True)
class FailedAttempt:
    """One execute attempt that raised: which execution, with what input, and why."""

    step_type: str
    step_execution_id: str
    input_json: str | None
    error_type: str
    detail: str


@dataclass
class StepRecorder:
    """The executions and RPCs of one Flow, in the order they committed.

    While ``quiet()`` is entered, RPCs run unrecorded (a test's polling probes).
    """

    flow: FlowDefinition
    executions: list[RecordedExecution] = field(default_factory=list)
    waits: dict[str, RecordedWait] = field(default_factory=dict)
    rpc_calls: list[RecordedRpc] = field(default_factory=list)
    failed_attempts: list[FailedAttempt] = field(default_factory=list)
    recording_rpcs: bool = True

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Run the RPCs of the ``with`` body without recording them."""
        self.recording_rpcs = False
        try:
            yield
        finally:
            self.recording_rpcs = True

    def waits_without_execution(self) -> list[RecordedWait]:
        """The wait phases whose execution never committed: cancelled while waiting, every
        execute attempt failed, or still waiting when the session stopped."""
        executed = {execution.step_execution_id for execution in self.executions}
        return [wait for key, wait in self.waits.items() if key not in executed]

    def failed_execution(self, execution: RecordedExecution) -> FailedAttempt | None:
        """The last failed attempt that ``execution``, a failure route, recovers; ``None``
        when no attempt raised for it (its worker was lost, say)."""
        recovery = execution.recovery_error
        if recovery is None:
            return None
        wanted = to_json(execution.input)
        return next(
            (
                failed
                for failed in reversed(self.failed_attempts)
                if failed.input_json == wanted
                and failed.error_type == recovery.error_type
                and failed.detail == recovery.detail
            ),
            None,
        )

    def recording_rpc(self, rpc: Rpc[Any, Any]) -> Rpc[Any, Any]:
        """``rpc`` with a handler that records each successful transaction."""

        def handler(context: RpcContext, input: Any) -> RpcResult[Any]:
            if not self.recording_rpcs:
                return rpc.handler(context, input)
            state = context.state
            assert isinstance(state, StagedState)
            record = RecordedRpc(
                name=rpc.name,
                input=input,
                now=context.now,
                read=read_state(self.flow, state),
                pending={
                    channel.name: [(m.message_id, m.value) for m in state.pending_messages(channel)]
                    for channel in rpc.channel_loads
                },
            )
            result = rpc.handler(context, input)
            record.output = result.output
            record.writes = dict(state.writes)
            record.publishes = [(p.channel, p.key, p.value) for p in state.publishes]
            record.deleted_messages = list(state.deleted_messages)
            record.next_steps = result.next_steps
            record.canceling_steps = result.canceling_steps
            self.rpc_calls.append(record)
            return result

        return replace(rpc, handler=handler)

    def install(self) -> None:
        """Wrap every Step instance of the Flow (instance attributes shadow the methods)."""
        for step in self.flow.steps:
            step.execute = self._recording_execute(step)  # type: ignore[method-assign,assignment]
            if step.has_wait():
                step.wait_for = self._recording_wait(step)  # type: ignore[method-assign,assignment]

    def _recording_wait(
        self, step: Step[Any]
    ) -> Callable[[WaitContext, Any], Coroutine[Any, Any, Wait]]:
        original = step.wait_for

        async def wait_for(context: WaitContext, input: Any) -> Wait:
            state = context.state
            assert isinstance(state, StagedState)
            read = read_state(self.flow, state)
            wait = await original(context, input)
            self.waits[context.step_execution_id] = RecordedWait(
                step.step_type, context.step_execution_id, input, context.now, read, wait
            )
            return wait

        return wait_for

    def _recording_execute(
        self, step: Step[Any]
    ) -> Callable[[StepContext, Any], Coroutine[Any, Any, StepDecision]]:
        original = step.execute

        async def execute(context: StepContext, input: Any) -> StepDecision:
            state = context.state
            assert isinstance(state, StagedState)
            record = RecordedExecution(
                step_type=step.step_type,
                step_execution_id=context.step_execution_id,
                input=input,
                attempt=context.attempt,
                first_attempt_at=context.first_attempt_at,
                now=context.now,
                read=read_state(self.flow, state),
                wait_result=context.wait_result,
                last_heartbeat_value=context.last_heartbeat_value,
                recovery_error=context.recovery_error,
                wait=self.waits.get(context.step_execution_id),
            )
            try:
                decision = await original(_RecordingContext(context, record), input)
            except Exception as error:
                self.failed_attempts.append(
                    FailedAttempt(
                        step.step_type,
                        context.step_execution_id,
                        to_json(input),
                        type(error).__name__,
                        str(error),
                    )
                )
                raise
            record.writes = dict(state.writes)
            record.publishes = [(p.channel, p.key, p.value) for p in state.publishes]
            record.events.extend(text for _, text in state.events)
            record.decision = decision
            self.executions.append(record)
            return decision

        return execute


def record_steps(flow: FlowDefinition) -> StepRecorder:
    """Start recording ``flow``'s Step executions; build the engine after this."""
    recorder = StepRecorder(flow)
    recorder.install()
    return recorder
