"""The embedded engine's worker: claims runnable Step executions and runs them.

A worker claims an execution under a lease, runs its wait phase or an execute
attempt outside any store transaction, and commits the result in one. It renews
the leases of its running attempts (``worker_leases.py``), so a worker killed with
SIGKILL simply stops renewing them, and another worker (or this one, restarted)
takes the attempt over once the lease lapses. An idle worker holds no lease, no thread and no coroutine
per waiting Step: waits are rows in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from dex_agents.adapters.local import attempts, claims, handoff, lease_recovery
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.round_slots import RoundSlots
from dex_agents.adapters.local.running_attempts import RunningAttempt
from dex_agents.adapters.local.sqlite_store import StoreError
from dex_agents.adapters.local.step_context import DEFAULT_EVENT_FLUSH_INTERVAL
from dex_agents.adapters.local.store_faults import StoreFaultLog, until_stored
from dex_agents.adapters.local.wait_phase_failures import WaitPhaseFailures
from dex_agents.adapters.local.wake_up import WakeUp
from dex_agents.adapters.local.worker_handoffs import WorkerHandOffs, took_everything
from dex_agents.adapters.local.worker_leases import WorkerLeases
from dex_agents.ports.engine import ENGINE_LOGGER as logger
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.store_capabilities import WorkerMark, WorkerMarks

R = TypeVar("R")


MARK_LOOK_INTERVAL = timedelta(seconds=1)
"""How often a worker looks at the marks of the workers holding leases (``WorkerMarks``):
a worker whose process ended loses its leases then, not when they lapse."""


def check_max_concurrent_tasks(value: object) -> None:
    """Refuse a slot count that is not a whole number of at least 1, naming the value."""
    # A float such as 1.5 or NaN compared fine here and broke the first claim round.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_concurrent_tasks must be a whole number, 1 or more, not {value!r}")


class LocalWorker(WorkerHandOffs, WorkerLeases):
    """Runs the Steps of the Flow types its engine serves, up to ``max_concurrent_tasks`` at once."""

    def __init__(
        self,
        engine: LocalEngine,
        *,
        max_concurrent_tasks: int = 16,
        worker_id: str | None = None,
        event_flush_interval: timedelta = DEFAULT_EVENT_FLUSH_INTERVAL,
    ) -> None:
        check_max_concurrent_tasks(max_concurrent_tasks)
        self._engine = engine
        self._max = max_concurrent_tasks
        self.worker_id = worker_id or f"worker-{uuid.uuid4()}"
        self.event_flush_interval = event_flush_interval
        self.wait_failures = WaitPhaseFailures()
        self._running: dict[int, RunningAttempt] = {}
        # Slots promised to claims whose transaction has not returned yet.
        self._reserved = 0
        # Clients' commits that lease Steps to this worker, awaited apart from their callers
        # (``_then_take``), and the attempts' tasks that commit their result now.
        self._taking: set[asyncio.Task[Any]] = set()
        self._committing: set[asyncio.Task[Any]] = set()
        # The slots of the claim round in flight, which a client's hand-off may borrow.
        self._round: RoundSlots | None = None
        # Whether runnable work may be waiting for a free slot.
        self._starved = False
        # The engine's count of loud commits when this worker last ran a claim round.
        self._seen_loud = 0
        self._stopping = asyncio.Event()
        self._slot_freed = asyncio.Event()
        # Ends the claim loop's wait: set with either event above, and by loud commits.
        self._wake = WakeUp()
        self._faults = StoreFaultLog(logger, self.worker_id)
        self._loop: asyncio.AbstractEventLoop | None = None
        store = engine.store
        self._marks = store if isinstance(store, WorkerMarks) else None
        self._mark: WorkerMark | None = None

    async def transact(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        """``engine.run(work)``, retried through store faults until it commits or the worker stops.

        ``durable=False`` for the worker's own bookkeeping that starts nothing: leases,
        waits decided from state, live events; a power failure may take it back without
        harm. A commit that hands out claims is durable (``handing_off``, ``_claim_round``):
        what it claimed from may be another process's commit whose sync is still running
        (``wal_sync.py``), and the Steps it starts may call out before a power failure would
        take back both.
        """
        engine = self._engine
        return await until_stored(
            lambda: engine.run(work, durable=durable), self._faults, give_up=self._stopping.is_set
        )

    def _cancellable(self, running: RunningAttempt) -> asyncio.Task[None] | None:
        """The attempt's task, unless it is done or commits its result (a hand-off) now."""
        task = running.task
        if task is None or task.done() or task in self._committing:
            return None
        return task

    @property
    def engine(self) -> LocalEngine:
        """The engine whose Steps this worker runs."""
        return self._engine

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop ``run`` runs on (``None`` before it starts)."""
        return self._loop

    async def read(self, work: Callable[[StoreTransaction], R]) -> R:
        """``engine.read(work)``, retried through store faults like ``transact``."""
        engine = self._engine
        return await until_stored(
            lambda: engine.read(work), self._faults, give_up=self._stopping.is_set
        )

    def _reserve(self, own_slots: int, most: int | None = None) -> int:
        free = max(0, self._max - len(self._running) - self._reserved)
        limit = own_slots + (free if most is None else min(free, most))
        self._reserved += limit
        return limit

    def _start_all(self, taken: list[claims.Claim]) -> None:
        for claim in taken:
            self._start(claim)

    async def run(self) -> None:
        """Claim and run Steps until ``stop`` is called."""
        engine = self._engine
        self._loop = asyncio.get_running_loop()
        # Before the first claim or hand-off: a lease of this worker's is never older than
        # its mark.
        if self._marks is not None and self._mark is None:
            self._mark = self._marks.hold_worker_mark(self.worker_id)
            if self._mark is not None and self._mark.took_over:
                # Before anything is leased to this worker: every lease with its ID now is
                # the ended process's.
                await self.transact(
                    lambda tx: lease_recovery.recover_predecessor_leases(
                        tx, engine.flows, self.worker_id, engine.now()
                    )
                )
        if engine.hand_off_target is None:
            engine.hand_off_target = self
        renewer = asyncio.create_task(self._renew_leases())
        try:
            await self._claim_loop()
        finally:
            if engine.hand_off_target is self:
                engine.hand_off_target = None
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            engine.stalls.note(self.worker_id, None)  # a stopped worker stalls nothing
            holds_leases = await self._abandon_running()
            # A started attempt's lease is not handed back: a cancelled attempt may still
            # run on in a thread until the process ends. Its mark stays held until then,
            # so the process's exit, not the lease's end, gives it to another worker. With
            # no lease left, nothing of this worker can commit: its mark goes now.
            if self._mark is not None and not holds_leases:
                self._mark.release()
                self._mark = None

    async def stop(self) -> None:
        """Stop claiming; running attempts are cancelled, what never started is handed back,
        and a started attempt is left to its lease, or to this process's exit when the store
        keeps worker marks (``WorkerMarks``)."""
        self._stopping.set()
        self._wake.set()

    async def _claim_loop(self) -> None:
        try:
            await self._claim_until_stopped()
        except StoreError:
            if not self._stopping.is_set():
                raise
            # The store failed while the worker was stopping: nothing is left to claim.

    async def _claim_until_stopped(self) -> None:
        engine = self._engine
        counter: int | None = None
        # When the loop wakes without a commit, and when its next full round is due: lost
        # leases are recovered and Timers fired by full rounds alone.
        next_check = next_full = engine.now()
        last_full = next_full - engine.lease_duration  # the time the latest full round ran at
        # A worker's first round looks for workers that are gone (a restart finds the
        # leases of the process it replaces); later, a read once a second decides.
        next_look = next_full + MARK_LOOK_INTERVAL
        look_for_gone = self._marks is not None
        while not self._stopping.is_set():
            now = engine.now()
            if self._marks is not None and now >= next_look:
                next_look = now + MARK_LOOK_INTERVAL
                if not look_for_gone and await self._sees_gone_workers():
                    look_for_gone = True
                    next_check = now
            current = await until_stored(
                engine.recent_change_counter, self._faults, give_up=self._stopping.is_set
            )
            changed = current != counter
            loud = engine.loud_commits
            if (
                changed
                and current == engine.quiet_counter
                and not self._starved
                and loud == self._seen_loud
            ):
                # Only quiet commits of this process changed the store since the last round
                # (this worker's, or a client's that handed off to it): they left nothing
                # runnable. A commit of another process can land between such a commit and
                # the counter read after it, so look again soon rather than never.
                counter, changed = current, False
                next_check = min(next_check, engine.now() + engine.poll_interval)
            slot_freed = self._slot_freed.is_set()
            self._slot_freed.clear()
            if changed or now >= next_check or (slot_freed and self._starved):
                # The counter read before the claim: a commit that lands after the claim
                # (another process's, or a client's) then still wakes the next wait.
                counter = current
                self._seen_loud = loud
                slots = RoundSlots(self._reserve(0))
                # With no free slot a round could claim nothing: until its cadence comes,
                # a commit elsewhere is looked at for cancellations alone, without the
                # write lock (busy workers of many sessions took it at every such commit).
                full = slots.limit > 0 or now >= next_full or look_for_gone
                try:
                    if full:
                        self._round = slots
                        round_ = await self._claim_round(slots, look_for_gone)
                        look_for_gone = False
                    else:
                        round_ = await self._read_at_capacity()
                finally:
                    self._round = None
                    self._reserved -= slots.limit
                handoff.settle_ran(round_.ran)
                self._forget_marks(round_.gone_owners)
                self._starved = not round_.complete
                self._start_all(round_.claims)
                # A cancel_turn in any process stops a running model call at the next
                # commit anyone makes, not at the next lease renewal.
                self._cancel(round_.cancel_requested)
                next_timer = round_.next_timer_at
                # Lost leases of other workers are found on this cadence even when
                # nothing else changes; timers fire when they are due.
                if full:
                    last_full = now
                    next_full = engine.now() + engine.lease_duration / 2
                # A time no later than the latest full round's was dealt with there: its Timer
                # fired, or its Step was due and could not be taken (no free slot, a lock
                # held, a Flow type served elsewhere). Waking for it again would spin; a slot
                # that frees or a commit wakes the loop instead.
                if next_timer is not None and next_timer > last_full:
                    next_full = min(next_full, next_timer)
                next_check = next_full
            wake_at = next_check if self._marks is None else min(next_check, next_look)
            timeout = max(wake_at - engine.now(), timedelta(0))
            await engine.wait_for_work(counter or 0, timeout, self._wake)

    async def _claim_round(
        self, slots: RoundSlots, look_for_gone: bool = False
    ) -> claims.ClaimRound:
        """``claims.claim_round`` for up to the slots it holds as its transaction begins,
        committed quietly when it took everything it found, and durably: a round that
        claimed nothing wrote nothing to sync. With ``look_for_gone`` it first recovers the
        leases of workers whose marks say their process ended."""
        engine = self._engine
        gone = self._marks.worker_gone if look_for_gone and self._marks is not None else None
        work = functools.partial(
            claims.claim_round,
            flows=engine.flows,
            owner=self.worker_id,
            clock=engine.now,
            lease=engine.lease_duration,
            slots=slots,
            run_claimed=handoff.run_claimed,
            gone=gone,
        )
        # A round that keeps failing on a damaged file runs no Step of any session: this
        # process's waits say so (``stalled_workers.py``).
        return await self._commit_quietly(work, took_everything, stalls=True)

    async def _sees_gone_workers(self) -> bool:
        """Whether another worker holding leases is gone, by its mark: a read, and a look at
        the marks of the owners it names (none while no other worker runs a Step). The
        marks of gone workers that hold no lease are removed."""
        marks = self._marks
        if marks is None:
            return False
        # A worker killed holding no lease (its sessions waited for their users) has no lease
        # to recover, so no round removed its mark: it stayed beside the database for ever.
        # The look comes before the read, so a process gone at the look committed its last
        # lease before the read began: an owner the read finds no lease of holds none.
        idle_gone = marks.gone_owners()
        owners = await self.read(lambda tx: tx.lease_owners())
        self._forget_marks(idle_gone - owners)
        return any(marks.worker_gone(owner) for owner in owners - {self.worker_id})

    def _forget_marks(self, owners: frozenset[str]) -> None:
        if self._marks is not None:
            for owner in owners:
                self._marks.forget_worker_mark(owner)

    async def _read_at_capacity(self) -> claims.ClaimRound:
        """``claims.capacity_round`` for this worker's running attempts, read through store
        faults until it answers or the worker stops."""
        engine = self._engine
        work = functools.partial(claims.capacity_round, owner=self.worker_id)
        return await until_stored(
            lambda: engine.read(work), self._faults, give_up=self._stopping.is_set
        )

    def _start(self, claim: claims.Claim) -> None:
        self._stop_superseded(claim.row.id)
        flow = self._engine.flow(claim.flow_type)
        running = RunningAttempt(claim.row, flow, None, claim)
        self._running[claim.row.id] = running
        if claim.phase == "wait":
            coroutine = attempts.run_wait(self, running)
        else:
            step = flow.step(claim.row.step_type)
            running.options = flow.options(step, claim.row.options)
            coroutine = attempts.run_execute(self, running)
        running.task = asyncio.create_task(coroutine)
        running.task.add_done_callback(functools.partial(self._finished, claim.row.id))

    def _finished(self, key: int, task: asyncio.Task[None]) -> None:
        running = self._running.get(key)
        # A wait phase may hand its own execution on to its execute phase under the same key.
        if running is not None and running.task is task:
            del self._running[key]
        if not task.cancelled() and task.exception() is not None:
            # Only a store fault while stopping gets here: its lease lapses and it is taken over.
            logger.warning("an attempt ended without a result: %s", task.exception())
        self._slot_freed.set()
        # A freed slot matters to the claim loop only while runnable work waits for one
        # (``_starved``). A loop waiting with nothing starved would wake for a pass that
        # does nothing (a future, a timer and a counter read each Step): it is left asleep.
        # A loop not waiting is mid-pass, and its round may yet come back starved with this
        # slot unseen: the wake is kept for its next wait, as before.
        if self._starved or not self._wake.waiting:
            self._wake.set()

    def _cancel(self, ids: set[int]) -> None:
        for key in ids:
            running = self._running.get(key)
            if running is None:
                continue
            task = self._cancellable(running)
            if task is None:
                continue  # done, or its result commits now: the result stands
            running.cancel_requested = True
            if running.context is not None:
                running.context.cancellation_requested = True
            task.cancel()

    async def _abandon_running(self) -> bool:
        """Cancel the running attempts and hand back what never started; return whether this
        worker still holds leases (of started attempts, or because the store failed)."""
        tasks = [running.task for running in self._running.values() if running.task is not None]
        for running in self._running.values():
            task = self._cancellable(running)
            if task is not None:
                task.cancel()  # one that commits its result finishes, and starts nothing
        await asyncio.gather(*tasks, return_exceptions=True)
        # Commits that lease to this worker and are still on their way (a client's, or an
        # attempt's whose task was just cancelled): what they lease must be handed back too.
        await asyncio.gather(*self._taking, return_exceptions=True)
        engine = self._engine
        owner = self.worker_id

        def release(tx: StoreTransaction) -> bool:
            return lease_recovery.release_unstarted(tx, engine.flows, owner, engine.now()).kept > 0

        # Work that never started goes back at once rather than after its lease
        # lapses, so another worker (or this one, restarted) takes it over promptly.
        try:
            return await engine.run(release, durable=False)
        except Exception:
            return True
