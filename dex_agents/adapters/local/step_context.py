"""What a Step attempt sees on the embedded engine: its state, wait result, heartbeats and live events."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any, TypeVar

from dex_agents.adapters.local.codec import decode_recovery, decode_wait_result
from dex_agents.adapters.local.decoded_values import DECODED
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.staged_state import StagedState
from dex_agents.adapters.local.store_errors import StoreError
from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports.engine import ENGINE_LOGGER
from dex_agents.ports.flow_rows import ExecutionRow
from dex_agents.ports.persistence import StateReader, StreamDef
from dex_agents.ports.step_contexts import AttemptResult, RecoveryError
from dex_agents.ports.step_waits import WaitResult

T = TypeVar("T")

DEFAULT_EVENT_FLUSH_INTERVAL = timedelta(milliseconds=50)
"""How long live Stream events of a running attempt may wait to be written, batched."""


class LeaseLostError(asyncio.CancelledError):
    """A heartbeat found that its attempt's worker no longer holds the lease: the worker
    stalled past it and another worker (or a later round) runs the attempt now.

    A ``CancelledError``, as Dex's heartbeat raises for a cancelled invocation: the
    attempt stops where it is, records nothing (``is_cancellation_requested`` stays
    ``False``), and the Step's code after the heartbeat, a tool's call, does not run
    a second time beside the attempt that replaced it."""


class LocalWaitContext:
    """A wait phase's view: the execution's IDs and committed state."""

    def __init__(self, row: ExecutionRow, state: StateReader, now: datetime) -> None:
        self._row = row
        self._state = state
        self._now = now

    @property
    def flow_id(self) -> str:
        """The session ID."""
        return self._row.flow_id

    @property
    def step_execution_id(self) -> str:
        """``<StepType>-<n>``."""
        return self._row.step_execution_id

    @property
    def now(self) -> datetime:
        """The engine's clock when the wait phase runs."""
        return self._now

    @property
    def state(self) -> StateReader:
        """Committed state with the Step's ``wait_loads``."""
        return self._state


class LocalStepContext:
    """An execute attempt's context. Live events and heartbeats go through ``flush``/``beat``."""

    def __init__(
        self,
        flow: RegisteredFlow,
        row: ExecutionRow,
        state: StagedState,
        now: datetime,
        *,
        beat: Callable[[str | None, list[str], bool], Awaitable[bool]],
        flush: Callable[[list[str]], Awaitable[bool]],
        flush_interval: timedelta | None = DEFAULT_EVENT_FLUSH_INTERVAL,
        run_id: str | None = None,
        clock: Callable[[], datetime] | None = None,
        reports_result: bool = False,
    ) -> None:
        self._run_id = run_id
        # Only where its creator settles it after the commit (a worker's attempt, a Step
        # run in a commit); elsewhere on_result says no, and callers act at once.
        self._result_callbacks: list[Callable[[AttemptResult], None]] | None = (
            [] if reports_result else None
        )
        # The engine's clock: the worker measures a heartbeat's age against it
        # (``heartbeat_timeout``), so the time of a heartbeat must come from it too.
        self._clock = clock or (lambda: datetime.now(now.tzinfo))
        self._flow = flow
        self._row = row
        self._state = state
        self._now = now
        self._beat = beat
        self._flush = flush
        self._flush_interval = flush_interval
        self._buffer: list[str] = []
        self._flusher: asyncio.Task[None] | None = None
        # One commit carrying live events at a time. One the store fails puts its events
        # back in front of the buffer, before newer ones, which holds only while no other
        # commit took and wrote newer ones meanwhile: until 2026-12-07 a heartbeat's commit
        # during a flush the store then failed put the flush's events after its own.
        self._sending = asyncio.Lock()
        # The commits carrying live events, each in a task of its own (``_on_its_way``), and
        # those of them the attempt's own task sent (its heartbeats), for ``sender``.
        self._sends: set[asyncio.Task[Any]] = set()
        self._own_sends: set[asyncio.Task[Any]] = set()
        # The attempt's task, which builds its context.
        self._attempt_task = None if flush_interval is None else asyncio.current_task()
        self._closed = False
        self.started = False
        self.last_heartbeat_at = now
        self.cancellation_requested = False

    @property
    def flow_id(self) -> str:
        """The session ID."""
        return self._row.flow_id

    @property
    def run_id(self) -> str | None:
        """The Flow run's ID (``FlowRow.run_id``), when the worker read it with the snapshot."""
        return self._run_id

    @property
    def step_type(self) -> str:
        """The Step's type."""
        return self._row.step_type

    @property
    def step_execution_id(self) -> str:
        """``<StepType>-<n>``, shared by every attempt of this execution."""
        return self._row.step_execution_id

    @property
    def attempt(self) -> int:
        """The one-based attempt number."""
        return self._row.attempt

    @property
    def first_attempt_at(self) -> datetime:
        """When the first attempt started."""
        return self._row.first_attempt_at or self._now

    @property
    def now(self) -> datetime:
        """The engine's clock when this attempt started."""
        return self._now

    @property
    def state(self) -> StagedState:
        """The attempt's snapshot; writes commit with the result."""
        return self._state

    @property
    def wait_result(self) -> WaitResult:
        """Which condition ended the wait, and the messages it consumed, decoded."""

        def decode(channel: str, text: str) -> Any:
            return from_json(text, self._flow.channel(channel).value_type)

        return decode_wait_result(self._row.wait_result, decode)

    @property
    def recovery_error(self) -> RecoveryError | None:
        """Set in a failure route Step."""
        return decode_recovery(self._row.recovery)

    @property
    def last_heartbeat_value(self) -> str | None:
        """The checkpoint an earlier attempt saved."""
        return self._row.checkpoint

    def is_cancellation_requested(self) -> bool:
        """Whether an RPC, a decision, a missed heartbeat or the execute timeout stopped this
        attempt.

        ``False`` while the Worker closes: that attempt is handed out again.
        """
        return self.cancellation_requested

    def on_result(self, callback: Callable[[AttemptResult], None]) -> bool:
        """Run ``callback`` once the worker committed or dropped this attempt's result.

        ``False`` (and it never runs) for a context built without ``reports_result``.
        A worker that dies or stops before its commit never runs it, nor does a
        commit that fails (a Step run in it runs again when it is tried again).
        """
        if self._result_callbacks is None:
            return False
        self._result_callbacks.append(callback)
        return True

    def settle(self, result: AttemptResult) -> None:
        """Tell the ``on_result`` callbacks what became of the result (the worker calls it once)."""
        callbacks, self._result_callbacks = self._result_callbacks or [], None
        for callback in callbacks:
            try:
                callback(result)
            except Exception:
                # What a callback does (end a span) is never a reason to fail a commit
                # that already happened.
                ENGINE_LOGGER.exception("a result callback of %s failed", self.step_execution_id)

    async def heartbeat(self, checkpoint: str | None = None, *, durable: bool = True) -> None:
        """Record liveness and the checkpoint in one commit, with the pending live events.

        The commit is fsync'd unless ``durable`` is ``False`` and no checkpoint
        is given: a checkpoint is what a retry resumes from, so it always is.
        Such a mark (a ``read`` tool's, before the tool runs) leaves the pending
        events to the flush interval, as any other live event: a read that ends
        within it commits them with its result, and no reader wakes up twice.
        ``LeaseLostError`` when the worker no longer holds the attempt's lease; a
        ``StoreError`` leaves the pending events to a later commit.
        """
        if self._closed:
            return
        synced = durable or checkpoint is not None
        if (synced or self._flush_interval is None) and self._buffer:

            async def beat(events: list[str]) -> bool:
                return await self._beat(checkpoint, events, synced)

            held = await self._on_its_way(self._send(beat))
        else:
            self._flush_soon()
            held = await self._beat(checkpoint, [], synced)
        if not held:
            raise LeaseLostError(
                f"{self.step_execution_id} attempt {self.attempt} lost its lease; "
                "another worker runs it"
            )
        self.started = True
        self.last_heartbeat_at = self._clock()

    def write_event(self, stream: StreamDef[T], value: T) -> None:
        """Queue a live Stream event; it is written within the flush interval, even if the attempt fails.

        With no flush interval (an attempt run inside a commit) it waits for that commit.
        """
        if self._closed:
            return  # writes after the attempt returned are dropped
        text = to_json(value)
        # As for an event staged with a commit: a client of this process that follows the
        # session reads the event it just wrote, not a decode of its text.
        DECODED.written(text, stream.value_type, value)
        self._buffer.append(text)
        self._flush_soon()

    def _flush_soon(self) -> None:
        # One flusher at a time: the events written while it sleeps go with its flush.
        if not self._buffer or self._flush_interval is None:
            return
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        assert self._flush_interval is not None  # write_event starts no flusher without one
        # Events written while a flush is on its way find this flusher running, so none is
        # started for them: they go with a flush of their own after it. Until 2026-12-07
        # they waited for the next event or the attempt's end (a tool's progress, minutes).
        while True:
            await asyncio.sleep(self._flush_interval.total_seconds())
            if not await self._flush_now() or not self._buffer:
                return

    async def _flush_now(self) -> bool:
        """Write the buffered events; whether they were written (a fault puts them back)."""
        if not self._buffer:
            return False
        try:
            written = await self._on_its_way(self._send(self._flush_events))
        except StoreError:
            # A store fault (a write lock held past the busy timeout, a full disk) must
            # not end the attempt: raised here, the attempt's end met it and dropped its
            # result. The events wait for the next flush or the result's commit, which
            # the worker retries until the store works again.
            return False
        if written:
            self.started = True
        return written

    async def _flush_events(self, events: list[str]) -> bool:
        if not events:
            return False  # a heartbeat took them while this flush waited for its commit
        return await self._flush(events)

    async def _send(self, commit: Callable[[list[str]], Awaitable[T]]) -> T:
        """``commit`` the buffered events after the commit carrying older ones; a store
        fault puts them back in front of the buffer, for a later commit."""
        async with self._sending:
            events, self._buffer = self._buffer, []
            try:
                return await commit(events)
            except StoreError:
                self._buffer[:0] = events
                raise

    def _on_its_way(self, send: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """``send`` in a task of its own, which outlives a cancellation of its caller.

        A queued commit lands or fails whether or not its caller still waits: until
        2026-12-07 the attempt's end, cancelling the flusher (or the session's background
        heartbeat) mid-commit, lost the events of a commit the store then failed, which
        neither that commit nor the result's carried. ``wait_closed`` waits for these.
        The attempt's own heartbeats too: until 2026-12-07 they ran in its task, and the
        execute timeout stopping one mid-commit lost its events, which a failed attempt
        keeps (``sender`` still tells them apart).
        """
        if self._flush_interval is None:
            return send  # run in a commit: nothing runs beside it, and it must not suspend
        task = asyncio.get_running_loop().create_task(send)
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)
        if asyncio.current_task() is self._attempt_task:
            self._own_sends.add(task)
            task.add_done_callback(self._own_sends.discard)
        return asyncio.shield(task)

    def sender(self, task: asyncio.Task[Any] | None) -> asyncio.Task[Any] | None:
        """The task on whose behalf ``task`` runs: the attempt's task when ``task`` carries one
        of its own heartbeats (``_on_its_way``), otherwise ``task``.

        A heartbeat that finds the lease taken raises ``LeaseLostError`` in the task that
        sent it, so the worker stops the attempt's task only when another task sent it
        (``WorkerLeases.stop_lost_run``).
        """
        if task is not None and task in self._own_sends:
            return self._attempt_task
        return task

    def close(self) -> list[str]:
        """End the attempt: no more live writes; return the events still buffered for the commit."""
        self._closed = True
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
        events, self._buffer = self._buffer, []
        return events

    async def wait_closed(self) -> list[str]:
        """Let a cancelled flusher finish unwinding, and the commits of live events on their
        way finish; return the events those the store failed gave back, which are older
        than the ones ``close`` returned.

        A cancellation of the attempt that comes meanwhile ends here too, on purpose: the
        Step's code has returned, so the attempt goes on to commit its result, and that
        commit drops the result of an execution whose cancellation the store recorded
        (``transitions.commit_execute``). Raised, it would leave the execution leased to nobody
        running it until the lease lapsed (``test_cancel_after_return``).
        """
        if self._flusher is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        while self._sends:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(set(self._sends))  # cancelled, it leaves them running
        events, self._buffer = self._buffer, []
        return events
