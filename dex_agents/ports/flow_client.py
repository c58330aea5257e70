"""The client side of the engine port: start and stop Flows, run RPCs, read Streams and history.

``FlowClient`` is what ``AgentSessionClient`` talks to: the embedded engine's
``LocalFlowClient`` implements it, and the Dex adapter maps it onto a Dex client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.persistence import AttributeDef

T = TypeVar("T")


def check_poll_timeout(poll_timeout: timedelta | None) -> timedelta | None:
    """``read_stream``'s ``poll_timeout`` as given: ``None`` (the client's default) or 0 or more.

    Zero reads once without waiting. Raises ``ValueError`` for anything else.
    """
    if poll_timeout is not None and (
        not isinstance(poll_timeout, timedelta) or poll_timeout < timedelta(0)
    ):
        raise ValueError(
            f"poll_timeout must be None or a timedelta of 0 or more, not {poll_timeout!r}"
        )
    return poll_timeout


@dataclass(frozen=True)
class StreamMessage(Generic[T]):
    """One Stream event with the token that resumes after it."""

    value: T
    resume_token: str
    created_at: datetime
    source: str


@dataclass(frozen=True)
class FlowInfo:
    """A Flow run as a client sees it.

    ``failure_reason`` says why a ``failed`` (or stopped) run ended, where the engine
    tells: the embedded engine does; Dex SDK 1.23.0 reports none, so it is ``None`` there.
    """

    flow_id: str
    flow_type: str
    status: str
    started_at: datetime
    closed_at: datetime | None
    active_step_types: tuple[str, ...]
    failure_reason: str | None = None


@dataclass(frozen=True)
class StepHistoryEntry:
    """A completed Step, for tests and for a developer debugging a session."""

    event_type: str
    step_type: str
    step_execution_id: str
    final_attempt: int


EXECUTE_COMPLETED_EVENT = "EXECUTE_COMPLETED"
"""The history event type of a Step whose execute phase committed."""

EXECUTE_FAILED_EVENT = "EXECUTE_FAILED"
"""The history event type of a Step whose attempts were spent with no failure route."""

STEP_CANCELLED_EVENT = "STEP_CANCELLED"
"""The history event type of a Step execution that a decision or an RPC cancelled."""


class FlowClient(Protocol):
    """A client of an engine: start and stop Flows, run RPCs, read Streams and history."""

    async def start_flow(
        self,
        flow: FlowDefinition,
        flow_id: str,
        input: Any,
        *,
        initial_attributes: Mapping[AttributeDef[Any], Any] | None = None,
    ) -> str:
        """Start a Flow run; return its run ID. Raises ``FlowAlreadyStartedError``."""
        ...

    async def invoke_rpc(self, flow: FlowDefinition, flow_id: str, rpc: str, input: Any) -> Any:
        """Run an RPC in one transaction and return its output."""
        ...

    async def stop_flow(self, flow_id: str, reason: str | None = None) -> None:
        """Stop a Flow run: cancel its Steps; its state stays readable."""
        ...

    async def describe_flow(self, flow_id: str) -> FlowInfo:
        """A Flow run's status and the Step types it is active in."""
        ...

    async def read_stream(
        self,
        flow: FlowDefinition,
        flow_id: str,
        resume_token: str = "",
        poll_timeout: timedelta | None = None,
    ) -> StreamMessage[Any]:
        """The next event after ``resume_token`` (the oldest retained one for ``""``).

        Long-polls up to ``poll_timeout`` (``check_poll_timeout``: zero reads once);
        raises ``StreamReadTimeoutError`` when none arrives and
        ``InvalidResumeTokenError`` for a token this Stream never issued.
        """
        ...

    async def read_step_history(self, flow_id: str) -> Sequence[StepHistoryEntry]:
        """Completed Step executions, oldest first."""
        ...

    async def read_attribute(self, flow_id: str, attribute: AttributeDef[T]) -> T | None:
        """An Attribute's committed value, or ``None`` when it is unset."""
        ...

    async def list_flows(self, flow_type: str | None = None) -> Sequence[FlowInfo]:
        """Every Flow run this engine knows (of one type), oldest first."""
        ...
