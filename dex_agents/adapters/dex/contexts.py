"""The port's wait and execute contexts over a Dex ``AsyncContext``.

Dex SDK 1.23.0's ``RecoveryErrorInfo`` has no ``attempt_progress``, so a failure
route cannot ask Dex whether the failed Step ever reached its code. The adapter
derives it from heartbeats, which Dex keeps per Step execution:

- Before a Step with a failure route runs its code, the adapter heartbeats a
  checkpoint that says "entered, not started", naming the Step execution;
  "started" instead when an earlier attempt of the execution marked it started,
  since the port's ``NOT_STARTED`` means that no attempt ever reached the code.
- The Step's first heartbeat or Stream event (the port's start mark) first
  heartbeats "started".
- A failure route reports ``NOT_STARTED`` only when it is handed the failed
  execution's last checkpoint and that checkpoint says "not started". Otherwise,
  including when Dex does not hand a recovery Step the failed execution's
  heartbeat (not verified against a server), it reports ``NOT_COMPLETED``: a
  write is then recorded ``outcome_unknown``, never silently repeated.

The port's own checkpoint travels inside the same heartbeat value.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TypeVar

import dex

from dex_agents.adapters.dex.schema import DexSchema
from dex_agents.adapters.dex.state import DexState
from dex_agents.adapters.dex.wire_values import to_dex
from dex_agents.domain.canonical_json import dumps
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.step_contexts import AttemptProgress, RecoveryError
from dex_agents.ports.step_waits import WaitResult

T = TypeVar("T")


def encode_progress(step_execution_id: str, started: bool, checkpoint: str | None) -> str:
    """The heartbeat value: which execution wrote it, whether its code started, the checkpoint."""
    return dumps({"execution": step_execution_id, "started": started, "checkpoint": checkpoint})


def decode_progress(value: str | None) -> tuple[str, bool, str | None] | None:
    """Read a heartbeat value back; ``None`` for a value the adapter did not write."""
    if value is None:
        return None
    try:
        data = json.loads(value)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("execution"), str):
        return None
    checkpoint = data.get("checkpoint")
    return (
        data["execution"],
        data.get("started") is True,
        checkpoint if isinstance(checkpoint, str) else None,
    )


def _last_heartbeat(context: dex.Context) -> str | None:
    if not context.has_last_heartbeat_value():
        return None
    value = context.get_last_heartbeat_value(str)
    return value if isinstance(value, str) else None


def derive_attempt_progress(
    last_heartbeat: str | None, failed_step_execution_id: str
) -> AttemptProgress:
    """``NOT_STARTED`` only on proof: the failed execution's own last mark says "not started"."""
    decoded = decode_progress(last_heartbeat)
    if decoded is None:
        return AttemptProgress.NOT_COMPLETED
    execution, started, _ = decoded
    if execution == failed_step_execution_id and not started:
        return AttemptProgress.NOT_STARTED
    return AttemptProgress.NOT_COMPLETED


def recovery_error(context: dex.Context) -> RecoveryError | None:
    """The port's ``RecoveryError`` for a failure route, with the derived attempt progress."""
    info = context.recovery_error
    if info is None:
        return None
    progress = derive_attempt_progress(_last_heartbeat(context), context.from_step_execution_id)
    return RecoveryError(detail=info.detail, error_type=info.error_type, attempt_progress=progress)


class DexHandlerView:
    """What every handler context over Dex shares: the Dex Context, the state view, the clock.

    Dex gives a handler no engine clock, so ``now`` is the worker's (UTC), read
    once when the handler starts.
    """

    def __init__(self, context: dex.Context, state: DexState, now: datetime) -> None:
        self._context = context
        self._state = state
        self._now = now

    @property
    def flow_id(self) -> str:
        """The session ID."""
        return self._context.flow_id

    @property
    def now(self) -> datetime:
        """The worker's clock (UTC) when the handler started."""
        return self._now

    @property
    def state(self) -> DexState:
        """State as Dex loaded it for this handler; writes commit with its result."""
        return self._state


class DexWaitContext(DexHandlerView):
    """A wait phase's view: the execution's IDs and the state Dex loaded for it (read-only)."""

    @property
    def step_execution_id(self) -> str:
        """``<StepType>-<n>``, shared by every attempt of this Step execution."""
        return self._context.step_execution_id


class DexStepContext(DexHandlerView):
    """An execute attempt's context over a Dex ``AsyncContext``."""

    _context: dex.AsyncContext

    def __init__(
        self,
        context: dex.AsyncContext,
        state: DexState,
        schema: DexSchema,
        step_type: str,
        wait_result: WaitResult,
        now: datetime,
    ) -> None:
        super().__init__(context, state, now)
        self._schema = schema
        self._step_type = step_type
        self._wait_result = wait_result
        decoded = decode_progress(_last_heartbeat(context))
        own = decoded is not None and decoded[0] == context.step_execution_id
        self._checkpoint = decoded[2] if own and decoded is not None else None
        # A retry after an attempt that reached the Step's code may repeat no less:
        # its failure route must not read "never started" from this attempt's mark.
        self._started_before = own and decoded is not None and decoded[1]

    async def mark_entered(self) -> None:
        """Record "entered" before the Step's code runs, for a failure route.

        The mark says "not started" unless an earlier attempt of this execution
        marked it started.
        """
        await self._context.heartbeat(
            encode_progress(self._context.step_execution_id, self._started_before, self._checkpoint)
        )

    @property
    def step_type(self) -> str:
        """The Step's type."""
        return self._step_type

    @property
    def run_id(self) -> str:
        """The Flow run ID Dex gives the attempt (``Context.run_id``)."""
        return self._context.run_id

    @property
    def step_execution_id(self) -> str:
        """``<StepType>-<n>``, shared by every attempt of this Step execution."""
        return self._context.step_execution_id

    @property
    def attempt(self) -> int:
        """The one-based attempt number Dex counts."""
        return self._context.attempt

    @property
    def first_attempt_at(self) -> datetime:
        """When Dex started the first attempt of this Step execution (UTC)."""
        return self._context.first_attempt_at

    @property
    def wait_result(self) -> WaitResult:
        """Which wait condition ended the wait, and the messages it consumed."""
        return self._wait_result

    @property
    def recovery_error(self) -> RecoveryError | None:
        """Set only in a failure route Step (see the module docstring)."""
        return recovery_error(self._context)

    @property
    def last_heartbeat_value(self) -> str | None:
        """The checkpoint an earlier attempt of this execution saved with ``heartbeat``."""
        return self._checkpoint

    async def heartbeat(self, checkpoint: str | None = None, *, durable: bool = True) -> None:
        """Record liveness and mark the attempt started; a ``checkpoint`` is kept for the next attempt.

        The server records every heartbeat, so ``durable`` changes nothing here.
        """
        if checkpoint is not None:
            self._checkpoint = checkpoint
        await self._context.heartbeat(
            encode_progress(self._context.step_execution_id, True, self._checkpoint)
        )

    def write_event(self, stream: StreamDef[T], value: T) -> None:
        """Append a Stream event at once, best effort; it stays even if the attempt fails.

        Dex takes Stream writes synchronously, so an event cannot await a start
        mark; the session's tool Steps heartbeat before a tool runs, and that
        heartbeat is the start mark a failure route reads.
        """
        self._write(stream, value)

    def _write(self, stream: StreamDef[T], value: T) -> None:
        definition = self._schema.stream
        if definition is None or self._schema.stream_declaration is not stream:
            raise LookupError(f"Stream {stream.name} is not this Flow's")
        definition.write(self._context, to_dex(stream.value_type, value))

    def is_cancellation_requested(self) -> bool:
        """Whether Dex asked this Step execution to stop."""
        return self._context.is_cancellation_requested()

    def flush_staged_events(self) -> None:
        """Write the events the Step staged with its state, just before the result."""
        for stream, value in self._state.staged_events():
            self._write(stream, value)
