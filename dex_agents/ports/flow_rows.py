"""The rows a ``FlowStore`` keeps: Flow runs, Step executions, Channel messages, Stream events.

Plain values with no behaviour but their statuses' meaning; the engine reads and
writes them through ``dex_agents.ports.flow_store.StoreTransaction``. Values
travel as JSON text in the wire form of ``dex_agents.domain.wire``; times are
timezone-aware UTC datetimes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class FlowStatus(StrEnum):
    """A Flow run's status."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass
class FlowRow:
    """One Flow run. ``output`` and ``failure_reason`` are set when it closes."""

    flow_id: str
    flow_type: str
    run_id: str
    status: FlowStatus
    input: str
    created_at: datetime
    closed_at: datetime | None = None
    output: str | None = None
    failure_reason: str | None = None


class ExecutionStatus(StrEnum):
    """Where a Step execution stands.

    ``pending_wait``: its wait phase has not run yet. ``waiting``: its conditions
    are stored and nothing holds it. ``ready``: its execute phase may be claimed
    (from ``not_before``). ``running``: a worker holds it under a lease.
    ``completed``, ``failed`` and ``cancelled`` are final.
    """

    PENDING_WAIT = "pending_wait"
    WAITING = "waiting"
    READY = "ready"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        """Whether nothing will run for this execution again."""
        return self in _FINAL_EXECUTION_STATUSES


# A module constant, not the members named in is_final: on Python 3.11 each read of an enum
# member from its class goes through EnumType.__getattr__'s slow attribute hook, and the
# in-memory store asks is_final about 50 times a turn.
_FINAL_EXECUTION_STATUSES = (
    ExecutionStatus.COMPLETED,
    ExecutionStatus.FAILED,
    ExecutionStatus.CANCELLED,
)

ACTIVE_EXECUTION_STATUSES = (
    ExecutionStatus.PENDING_WAIT,
    ExecutionStatus.WAITING,
    ExecutionStatus.READY,
    ExecutionStatus.RUNNING,
)
"""The statuses of a Step execution that is not final."""


@dataclass
class ExecutionRow:
    """One Step execution and its current attempt.

    ``id`` is assigned by the store. ``step_execution_id`` is ``<StepType>-<n>``.
    ``options`` is the movement's options as JSON text, or ``None`` for the Step's
    own. ``wait`` holds the stored conditions and ``timer_at`` the earliest
    instant a Timer condition fires. ``wait_result`` is what ended the wait.
    ``attempt`` is the current (or next) attempt; ``attempt_started`` whether it
    reached the Step's code. ``lease_owner`` and ``lease_expires_at`` belong to the
    worker running it. ``checkpoint`` is the last heartbeat's checkpoint.
    ``recovery`` is the ``RecoveryError`` JSON a failure route execution receives.
    ``final_event`` names how it ended, for the Step history.
    """

    flow_id: str
    step_type: str
    step_execution_id: str
    input: str
    status: ExecutionStatus
    created_at: datetime
    id: int = 0
    options: str | None = None
    from_step_execution_id: str = ""
    wait: str | None = None
    wait_started_at: datetime | None = None
    timer_at: datetime | None = None
    wait_result: str | None = None
    attempt: int = 1
    attempt_started: bool = False
    first_attempt_at: datetime | None = None
    not_before: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    heartbeat_at: datetime | None = None
    checkpoint: str | None = None
    cancel_requested: bool = False
    recovery: str | None = None
    finished_at: datetime | None = None
    final_event: str | None = None


@dataclass(frozen=True)
class MessageRow:
    """A Channel message. ``seq`` orders messages; ``key`` is ``""`` for a plain Channel."""

    seq: int
    flow_id: str
    channel: str
    key: str
    message_id: str
    value: str
    created_at: datetime


@dataclass(frozen=True)
class EventRow:
    """A Stream event. ``id`` increases across the whole store."""

    id: int
    flow_type: str
    flow_id: str
    value: str
    source: str
    created_at: datetime
