"""A claimed execution as its worker runs it, the worker it runs in, and the state it reads.

The claim reads the state its phase loads with the lease (``claims.take``). When it
could not, the attempt reads it again once (``claimed_state``), retried through
passing store faults like the worker's own transactions; a value that is damaged
reads no better the next time, so that read raises ``UnreadableStateError`` and the
attempt fails, instead of reading again for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Protocol, TypeVar

from dex_agents.adapters.local import claims, handoff
from dex_agents.adapters.local.damaged_values import is_undecodable, scrub_undecodable_text
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.state_sources import (
    Snapshot,
    read_snapshot,
)
from dex_agents.adapters.local.step_context import LocalStepContext
from dex_agents.adapters.local.store_errors import UnreadableStateError
from dex_agents.adapters.local.wait_phase_failures import WaitPhaseFailures
from dex_agents.ports.engine import MapLoad, StepOptions
from dex_agents.ports.flow_rows import ExecutionRow
from dex_agents.ports.flow_store import StoreTransaction

R = TypeVar("R")


class RunningAttempt:
    """A claimed execution the worker runs and watches: its row, what the claim read, its task."""

    def __init__(
        self,
        row: ExecutionRow,
        flow: RegisteredFlow,
        options: StepOptions | None,
        claim: claims.Claim,
    ) -> None:
        self.row = row
        self.flow = flow
        self.snapshot = claim.snapshot
        self.run_id = claim.run_id
        self.options = options
        self.context: LocalStepContext | None = None
        self.task: asyncio.Task[None] | None = None
        self.stop_reason: BaseException | None = None
        # Its task was cancelled for a cancellation the store recorded (not a stopping worker).
        self.cancel_requested = False


class AttemptHost(Protocol):
    """The worker an attempt runs in: its engine and the commits that go through its faults."""

    @property
    def engine(self) -> LocalEngine:
        """The engine whose store the attempt commits to."""
        ...

    @property
    def wait_failures(self) -> WaitPhaseFailures:
        """The consecutive failed wait phases of the executions the worker ran."""
        ...

    @property
    def event_flush_interval(self) -> timedelta:
        """How long the attempt's live events may wait to be written, batched."""
        ...

    async def transact(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        """Run ``work`` in a store transaction, retried through store faults."""
        ...

    async def read(self, work: Callable[[StoreTransaction], R]) -> R:
        """Run ``work`` in a read transaction, retried through store faults."""
        ...

    async def handing_off(self, work: Callable[[StoreTransaction, int], handoff.HandOff]) -> bool:
        """Commit ``work`` durably and start what it leased; whether the lease still held."""
        ...

    def stop_lost_run(self, running: RunningAttempt) -> None:
        """Stop ``running``'s task, whose lease is lost, unless it calls this or commits now."""
        ...


async def claimed_state(
    host: AttemptHost, running: RunningAttempt, loads: Sequence[MapLoad]
) -> Snapshot:
    """The state the claim read with its lease, or (when it could not) read now.

    Raises ``UnreadableStateError`` when a value it loads is damaged; other store faults
    are retried as the worker's own transactions are.
    """
    snapshot = running.snapshot
    if snapshot is None:
        row, schema = running.row, running.flow.flow.schema

        def read(tx: StoreTransaction) -> tuple[Snapshot | Exception, str | None]:
            flow_row = tx.get_flow(row.flow_id)
            run_id = None if flow_row is None else flow_row.run_id
            try:
                return read_snapshot(tx, row.flow_id, schema, loads), run_id
            except Exception as error:
                # A damaged value reads no better the next time: returned, not raised, so
                # the read is not retried as a passing store fault (until 2026-12-07 it was,
                # for ever, holding the slot and renewing the lease).
                if is_undecodable(error):
                    # Its message goes into the attempt's stored failure: not the value.
                    scrub_undecodable_text(error)
                    return error, run_id
                raise

        fresh, running.run_id = await host.read(read)
        if isinstance(fresh, Exception):
            raise UnreadableStateError(
                f"the state of {row.step_type} in Flow run {row.flow_id!r} could not be read:"
                f" {fresh}"
            ) from fresh
        running.snapshot = fresh
        return fresh
    return snapshot
