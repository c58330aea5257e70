"""What the engine hands a Step's wait and execute phases and an RPC handler: their contexts.

A wait phase sees committed state read-only (``WaitContext``); an execute phase
sees its attempt, its wait's result and, in a failure route, why the routed Step
failed (``StepContext``, ``RecoveryError``); an RPC handler sees the session's
state in one transaction (``RpcContext``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol, TypeVar

from dex_agents.ports.persistence import StateReader, StateTransaction, StreamDef
from dex_agents.ports.step_waits import WaitResult

T = TypeVar("T")


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
    property (a ``str``); it is optional, so read it with ``step_run_id``. An
    engine that learns what became of the attempt's result also gives it an
    ``on_result`` method; it is optional too, so call it with ``on_attempt_result``.
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
        """Whether the engine stopped this attempt (an RPC, a decision, a missed heartbeat, or
        its ``execute_timeout``).

        On the embedded engine it stays ``False`` when the attempt stops because its
        Worker closes: that attempt is handed out again.
        """
        ...


def step_run_id(context: StepContext) -> str | None:
    """The Flow run ID of ``context``'s optional ``run_id`` property, or ``None`` without one.

    The embedded engine and the Dex adapter set it; a context that wraps another
    and leaves it out (or an engine that knows none) gives ``None``.
    """
    run_id = getattr(context, "run_id", None)
    return run_id if isinstance(run_id, str) and run_id else None


class ResultDropReason(StrEnum):
    """Why an engine dropped an attempt's result instead of committing it."""

    LEASE_LOST = "lease_lost"
    """Another worker took the attempt over; it runs the Step again."""
    COMMIT_FAILED = "commit_failed"
    """The store refused the result; the attempt counts as failed, for its retry policy."""


@dataclass(frozen=True)
class AttemptResult:
    """What became of an execute attempt's result once its engine tried to commit it.

    ``dropped`` is ``None`` when the result (or the attempt's failure) committed;
    otherwise why it did not, with the error type the engine names it by and a
    detail for people.
    """

    dropped: ResultDropReason | None = None
    error_type: str = ""
    detail: str = ""


def on_attempt_result(context: StepContext, callback: Callable[[AttemptResult], None]) -> bool:
    """Have ``callback`` run once, after ``context``'s engine committed or dropped its result.

    ``False`` when the engine cannot tell (its context has no ``on_result``, as on
    Dex, whose server commits without telling the Worker): the callback never
    runs, and the caller acts now. The engine calls it only while its worker
    lives: after a worker that died or stopped mid-commit, it never runs.
    """
    register = getattr(context, "on_result", None)
    return bool(register(callback)) if callable(register) else False


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
