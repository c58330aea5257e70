"""The embedded engine of one process: its Flow types, its store, its clock and its wake-ups.

A ``LocalEngine`` is shared by the clients and workers of one process. A store
transaction that can begin at once runs on the event loop's thread, where it
costs no hand-over between threads (on this machine a hop there and back took
more CPU than most transactions). A write that would wait for a lock held by
another thread or process is tried again there shortly, and only one still
waiting after ``LOOP_RETRY_BUDGET`` runs on a store thread of its own (as a
read that would wait does at once), so the loop never waits for another
writer (``GroupCommitQueue``). The loop does wait for its own commits'
fsyncs, which the SQLite store keeps to one per group of Steps. The engine
wakes local waiters at once after a commit that changed anything, except that a
worker's claim loop sleeps through quiet commits (``wait_for_work``). Other
processes' commits are seen as they land where the store signals its writes
(``WatchableWrites``: SQLite on Linux), and otherwise by polling the store's
change counter every ``poll_interval`` (100 ms by default), which costs one
cheap query and nothing else while the engine is idle; the polls stay beside the
signal, for whatever it misses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from dex_agents.adapters.local.flow_change_waits import FlowChanges
from dex_agents.adapters.local.group_commit import GroupCommitQueue
from dex_agents.adapters.local.handoff import HandOffTarget
from dex_agents.adapters.local.history_retention import DEFAULT_STEP_HISTORY_LIMIT
from dex_agents.adapters.local.read_rounds import ReadRounds
from dex_agents.adapters.local.registry import RegisteredFlow, register_flows
from dex_agents.adapters.local.stalled_workers import StalledWorkers
from dex_agents.adapters.local.store_errors import StoreError
from dex_agents.adapters.local.wake_up import WakeUp
from dex_agents.adapters.local.write_looks import WriteLooks
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import FlowDefinitionError
from dex_agents.ports.flow_store import FlowStore, StoreTransaction, StoreWouldWaitError
from dex_agents.ports.store_capabilities import FlowChangeLog

R = TypeVar("R")

DEFAULT_POLL_INTERVAL = timedelta(milliseconds=100)
"""How often an idle process looks for other processes' commits."""

COUNTER_REUSE = timedelta(milliseconds=1)
"""How long a change counter read stands for the next reads while this engine commits nothing:
another process's commit is seen that much later at most, a hundredth of ``poll_interval``."""

DEFAULT_LEASE_DURATION = timedelta(seconds=10)
"""How long a worker's claim on a running attempt lasts without renewal."""


MAX_ENGINE_INTERVAL = timedelta(days=36_500)
"""The longest ``poll_interval`` or ``lease_duration``: a hundred years, far inside the dates
the engine can write (a lease of thousands of years ran past year 9999 and its worker died)."""


def check_engine_interval(name: str, value: object) -> None:
    """Refuse an interval (``poll_interval``, ``lease_duration``) that is not a positive
    ``timedelta`` of at most ``MAX_ENGINE_INTERVAL``.

    ``name`` is the argument's name, which the ``ValueError`` gives with the value.
    """
    if not isinstance(value, timedelta):
        raise ValueError(f"{name} must be a positive timedelta, not {value!r}")
    if value <= timedelta(0):
        raise ValueError(f"{name} must be positive, not {value}")
    if value > MAX_ENGINE_INTERVAL:
        raise ValueError(f"{name} must be at most 100 years, not {value}")


def utc_now() -> datetime:
    """The engine's default clock."""
    return datetime.now(UTC)


class LocalEngine:
    """One process's view of an embedded engine: a store plus the Flow types it serves."""

    def __init__(
        self,
        store: FlowStore,
        flows: Sequence[FlowDefinition],
        *,
        poll_interval: timedelta = DEFAULT_POLL_INTERVAL,
        lease_duration: timedelta = DEFAULT_LEASE_DURATION,
        clock: Callable[[], datetime] = utc_now,
        step_history_limit: int | None = DEFAULT_STEP_HISTORY_LIMIT,
        retry_interval_scale: float = 1.0,
    ) -> None:
        check_engine_interval("poll_interval", poll_interval)
        check_engine_interval("lease_duration", lease_duration)
        self.store = store
        self.flows = register_flows(
            flows,
            step_history_limit=step_history_limit,
            retry_interval_scale=retry_interval_scale,
        )
        self.poll_interval = poll_interval
        self.lease_duration = lease_duration
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dex-agents-store")
        self._change_wakes: set[WakeUp] = set()  # waiting for any commit of this process
        self._work_wakes: set[WakeUp] = set()  # workers waiting for work (``wait_for_work``)
        self._last_counter: int | None = None
        self._commits = GroupCommitQueue(store, self._executor)
        self._reads = ReadRounds()  # the reads of one pass of the loop share a transaction
        self._flow_changes = FlowChanges(store if isinstance(store, FlowChangeLog) else None)
        self._watcher: asyncio.Task[None] | None = None
        # The store's write signal, read on the loop of the first wait.
        self._write_looks = WriteLooks(self._commits, self._wake, self._wake_workers)
        self._closed = False
        self.stalls = StalledWorkers(self._flow_changes.wake_all)
        """This process's workers that a damaged file stops: its Stream waits raise it."""
        self.hand_off_target: HandOffTarget | None = None
        """The worker of this process that clients' commits hand runnable Steps to, if any."""

    @property
    def loud_commits(self) -> int:
        """How many commits of this process were not quiet (see ``run_quietly``): a worker
        skips the claim round of a quiet change only when no loud one came with it."""
        return self._commits.loud_commits

    @property
    def quiet_counter(self) -> int | None:
        """The change counter right after this process's latest commit, when that commit was
        quiet; ``None`` when it was not. Noted as it commits, before its callers resume."""
        counter, quiet = self._commits.last_commit
        return counter if quiet else None

    def now(self) -> datetime:
        """The engine's clock, in UTC."""
        return self._clock()

    def flow(self, flow_type: str) -> RegisteredFlow:
        """A registered Flow type."""
        try:
            return self.flows[flow_type]
        except KeyError:
            raise FlowDefinitionError(f"this engine serves no Flow type {flow_type}") from None

    def registered(self, flow: FlowDefinition) -> RegisteredFlow:
        """The registration of a Flow definition this engine serves (the same object)."""
        registered = self.flow(flow.flow_type)
        if registered.flow is not flow:
            raise FlowDefinitionError(
                f"Flow type {flow.flow_type} is registered with another definition object"
            )
        return registered

    async def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        """Run one store transaction; wake local waiters if it changed anything.

        ``durable=False`` is for the engine's own bookkeeping (see ``FlowStore.run``).
        """
        if self._closed:
            raise RuntimeError("the engine is closed")

        return await self.run_quietly(work, durable=durable)

    async def run_quietly(
        self,
        work: Callable[[StoreTransaction], R],
        *,
        durable: bool = True,
        quiet: Callable[[R], bool] | None = None,
    ) -> R:
        """``run``, committed with whatever else is waiting to commit (``GroupCommitQueue``).

        ``quiet`` says of the work's result whether it leaves nothing for a claim round
        to do. A commit whose every work was quiet wakes no worker's claim loop
        (``wait_for_work``), and ``quiet_counter`` then names the counter after it.
        """
        if self._closed:
            raise RuntimeError("the engine is closed")
        result, counter, all_quiet = await self._commits.run(work, durable, quiet)
        if counter != self._last_counter:
            self._last_counter = counter
            self._wake()
            if not all_quiet:
                self._wake_workers()
        return result

    async def read(self, work: Callable[[StoreTransaction], R]) -> R:
        """Run read-only work on a snapshot; it never holds the write lock.

        On the loop's thread when the store can read at once (``InlineFlowStore``),
        otherwise on the store thread.
        """
        if self._closed:
            raise RuntimeError("the engine is closed")
        inline = self._commits.inline
        if inline is not None:
            # A read in place finishes without suspending, so let the loop's other tasks
            # run first: a caller polling in a tight loop must not starve the worker. The
            # reads asked for meanwhile run with this one (``read_rounds.py``).
            read = self._reads.queue(work)
            try:
                await asyncio.sleep(0)
                return self._reads.run(inline, read)
            except StoreWouldWaitError:
                pass
            finally:
                self._reads.drop(read)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.store.read, work)

    async def change_counter(self) -> int:
        """The store's change counter, read now on the calling thread.

        ``FlowStore.change_counter`` is a cheap poll that waits behind no
        transaction (SQLite reads it on a connection of its own), and a hop to
        the store thread and back costs far more than the poll itself.
        """
        return self._commits.change_counter(0)

    async def recent_change_counter(self) -> int:
        """``change_counter`` for a waiter: a read within ``COUNTER_REUSE`` of the last, with
        no commit of this engine between, gives the same number
        (``GroupCommitQueue.change_counter``).

        For waits alone: a waiter that sees no change sleeps until a wake-up or its
        next poll, so an earlier look only makes it notice another process's commit
        at that poll. A caller that decides from the counter whether a read is
        needed now (``flow_change_mark``) reads it fresh.
        """
        return self._commits.change_counter(COUNTER_REUSE.total_seconds())

    def _wake(self) -> None:
        for wake in self._change_wakes:
            wake.set()

    async def wait_for_change(self, since: int, within: timedelta) -> int:
        """Wait until the store changed after counter ``since``, at most ``within``; return the counter."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within.total_seconds()
        self._write_looks.start(self.store, loop)
        wake = WakeUp()
        # Registered before the counter is read: a commit after that read sets the wake-up.
        self._change_wakes.add(wake)
        try:
            while True:
                counter = await self.recent_change_counter()
                if counter != since:
                    return counter
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return counter
                await wake.wait(min(remaining, self.poll_interval.total_seconds()))
        finally:
            self._change_wakes.discard(wake)

    async def wait_for_work(self, since: int, within: timedelta, wake: WakeUp) -> None:
        """Wait until this process makes a commit that may leave Steps to claim, ``wake`` is
        set, the store's change counter moves from ``since`` (another process committed), or
        ``within`` passes, whichever comes first.

        Quiet commits (``run_quietly``) do not end it: they took everything they made
        runnable, so a claim round would find nothing. Other processes' commits are seen
        at the first poll after them.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within.total_seconds()
        self._write_looks.start(self.store, loop)
        # Registered before the counter is read: a commit after that read sets the wake-up.
        self._work_wakes.add(wake)
        try:
            while not await self._work_or_moved(since):
                remaining = deadline - loop.time()
                if remaining <= 0 or await wake.wait(
                    min(remaining, self.poll_interval.total_seconds())
                ):
                    return
        finally:
            self._work_wakes.discard(wake)

    async def _work_or_moved(self, since: int) -> bool:
        try:
            return await self.recent_change_counter() != since
        except StoreError:
            return True  # the waiter reads the counter again, and retries what fails

    async def flow_change_mark(self) -> int:
        """Look at the store's change counter now: the mark to pass to ``wait_for_flow_change``
        after a read that found nothing new of a Flow run."""
        return self._flow_changes.look(await self.change_counter())

    def flow_changed_after(self, flow_id: str, mark: int) -> bool:
        """Whether the looks so far saw ``flow_id`` get Stream events after ``mark``."""
        return self._flow_changes.changed_after(flow_id, mark)

    def run_changed_after(self, flow_id: str, mark: int) -> bool:
        """Whether the looks so far saw any commit change ``flow_id`` after ``mark`` (or could
        not tell which runs a commit changed)."""
        return self._flow_changes.run_changed_after(flow_id, mark)

    def runs_changed_after(self, mark: int) -> frozenset[str] | None:
        """Every run the looks so far saw a commit change after ``mark``; ``None`` when they
        cannot tell which runs changed (any may have)."""
        return self._flow_changes.runs_changed_after(mark)

    def last_events_change(self, flow_id: str) -> int | None:
        """The number of the newest commit the looks so far saw append to ``flow_id``'s Stream
        (``FlowChangeLog``); ``None`` when they cannot tell."""
        return self._flow_changes.last_events_change(flow_id)

    async def wait_for_flow_change(self, flow_id: str, mark: int, within: timedelta) -> int:
        """Wait until ``flow_id`` got Stream events after ``mark`` (or may have, when the
        store cannot tell which run did), at most ``within``; return the mark of now.

        Commits that give other runs events do not end it, so a reader of one session's
        Stream among many reads again only when that Stream grew. Raises
        ``StoreCorruptError`` while a damaged file stops a worker of this process
        (``stalled_workers.py``): no event would come.
        """
        # No Step of this process can run: a wait for the next event would wait it out.
        self.stalls.check()
        changes = self._flow_changes
        self._write_looks.start(self.store, asyncio.get_running_loop())
        now = changes.look(await self.recent_change_counter())
        if changes.changed_after(flow_id, mark) or within <= timedelta(0):
            return now
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        # Nothing awaits between the look above and this: a later look sees what comes next.
        changes.watch(flow_id, wake)
        if self._watcher is None:
            # Registered now, not when the task first runs: no commit in between goes unseen.
            watching = WakeUp()
            self._change_wakes.add(watching)
            self._watcher = asyncio.create_task(self._watch_flows(watching))
        # The time runs out as a wake-up, which cancels nothing: a cancellation of the reader
        # stays its own. Not wait_for, which in Python 3.11 loses a cancellation that comes
        # as the future completes (a reader being stopped kept reading), and not
        # asyncio.timeout, which cost 20 K instructions more a wait (3 waits a turn).
        timer = loop.call_later(within.total_seconds(), wake)
        try:
            await woken
        finally:
            timer.cancel()
            changes.unwatch(flow_id, wake)
        self.stalls.check()  # woken by a worker's stall (``StalledWorkers``)
        return changes.epoch

    async def _watch_flows(self, wake: WakeUp) -> None:
        """Look at the store after each local commit and each poll interval while readers wait:
        one look wakes the readers of the runs that got events."""
        changes = self._flow_changes
        try:
            while changes.watched():
                await wake.wait(self.poll_interval.total_seconds())
                changes.look(await self.recent_change_counter())
        except Exception:
            # The readers read for themselves, and meet whatever failed there.
            changes.wake_all()
        finally:
            self._change_wakes.discard(wake)
            self._watcher = None

    def _wake_workers(self) -> None:
        for wake in self._work_wakes:
            wake.set()

    def close(self) -> None:
        """Stop the store thread; the store itself belongs to the caller."""
        self._closed = True
        self._write_looks.end()
        if self._watcher is not None:
            with contextlib.suppress(RuntimeError):  # its loop may have closed before
                self._watcher.cancel()
        self._executor.shutdown(wait=True)
        self._write_looks.close()
