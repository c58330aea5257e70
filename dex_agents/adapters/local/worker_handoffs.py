"""How a worker takes the Steps a commit made runnable: hand-offs, without a claim round.

An attempt or wait phase that commits its result (``handing_off``), and a client's
commit (``commit_handing_off``, ``HandOffTarget``), may lease what they made runnable
straight to this worker, up to its free slots, and the worker starts it at once. The
slots are reserved while the commit runs, so claims never overlap; a client's commit
runs in a task of its own, so it lands, and what it leased starts, whether or not its
caller still waits.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from dex_agents.adapters.local import claims, handoff
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.round_slots import RoundSlots
from dex_agents.adapters.local.store_faults import StoreFaultLog, until_stored
from dex_agents.ports.flow_store import StoreTransaction

R = TypeVar("R")

HANDOFF_EXTRA_SLOTS = 3
"""How many free slots, besides its own, a committing attempt may fill with the Steps it starts."""


def took_everything(done: handoff.HandOff | claims.ClaimRound) -> bool:
    """Whether a commit took everything it made runnable, or a round everything it found:
    such a commit is quiet (``LocalEngine.run_quietly``)."""
    return done.complete


class WorkerHandOffs:
    """Mixed into ``LocalWorker``, which provides the attributes declared here, ``_reserve``
    (which reserves free slots), ``_start_all`` (which starts claims) and ``_cancel`` (which
    stops running attempts)."""

    worker_id: str
    _engine: LocalEngine
    _reserved: int
    _taking: set[asyncio.Task[Any]]
    _committing: set[asyncio.Task[Any]]
    _round: RoundSlots | None
    _starved: bool
    _stopping: asyncio.Event
    _faults: StoreFaultLog

    def _reserve(self, own_slots: int, most: int | None = None) -> int:
        raise NotImplementedError

    def _start_all(self, taken: list[claims.Claim]) -> None:
        raise NotImplementedError

    def _cancel(self, ids: set[int]) -> None:
        raise NotImplementedError

    async def handing_off(self, work: Callable[[StoreTransaction, int], handoff.HandOff]) -> bool:
        """Run a durable transaction that ends an attempt or a wait phase and may claim what it
        made runnable, up to this worker's free slots plus the one the attempt frees; start
        those claims.

        The slots are reserved until it returns, so claims never overlap. When it took
        everything it made runnable, the change it commits gives the claim loop nothing
        to do, and the loop skips the round it would run for it.
        """
        # Its own slot, and a few more: Steps that finish together each keep slots for
        # what they start, so one of them taking every free slot would starve the rest.
        limit = self._reserve(1, most=HANDOFF_EXTRA_SLOTS)
        if limit == 1 and self._round is not None:
            # A claim round holds the free slots: borrowed as a client's commit borrows them
            # (``commit_handing_off``). Left with its own slot alone, a commit that found its
            # one next Step could not tell that it took everything, and its loud commit ran a
            # round that held the slots from the next Step's commit in turn, a round a Step.
            limit += self._round.lend(HANDOFF_EXTRA_SLOTS)
        # The attempt's task is not cancelled while it commits (``_cancellable``): the commit
        # lands once queued, and what it leases would wait for its lease with nobody to run
        # it. A task of its own per commit, as a client's gets, cost 3% of a turn's CPU.
        task = asyncio.current_task()
        if task is not None:
            self._committing.add(task)
        try:
            result = await self._commit_quietly(lambda tx: work(tx, limit), took_everything)
        finally:
            self._reserved -= limit
            self._committing.discard(task)
        handoff.settle_ran(result.ran)
        self._took(result)
        return result.committed

    async def _then_take(self, commit: Awaitable[tuple[R, handoff.HandOff]], limit: int) -> R:
        """Await a client's ``commit``, which leases Steps to this worker on ``limit`` reserved
        slots, then start what it leased; the commit's own output.

        In a task of its own, which the caller's cancellation does not reach: the commit
        lands whether or not its caller still waits (a request dropped, an
        ``asyncio.timeout``), and what it leased would wait for its lease to lapse with
        nobody running it. ``_abandon_running`` waits for these tasks before it hands back
        what never started.
        """

        async def commit_and_take() -> R:
            try:
                output, result = await commit
            finally:
                self._reserved -= limit
            handoff.settle_ran(result.ran)
            self._took(result)
            return output

        task = asyncio.create_task(commit_and_take())
        self._taking.add(task)
        task.add_done_callback(self._taken)
        return await asyncio.shield(task)

    def _taken(self, task: asyncio.Task[Any]) -> None:
        self._taking.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: its caller, if it still waits, gets it as well

    def _took(self, result: handoff.HandOff) -> None:
        """Start what a committed hand-off leased to this worker, and note what it left.

        Once the worker stops it starts nothing: what it was leased stays unstarted, and
        ``_abandon_running`` hands it back to other workers."""
        if self._stopping.is_set():
            return
        if not result.complete:
            self._starved = True
        self._start_all(result.claims)
        self._cancel(result.cancel_requested)

    async def _commit_quietly(
        self,
        work: Callable[[StoreTransaction], R],
        quiet: Callable[[R], bool],
        *,
        stalls: bool = False,
    ) -> R:
        """A durable ``transact`` of work that hands out claims, which ``quiet`` may say made
        nothing runnable (``LocalEngine.run_quietly``); with ``stalls``, its faults are noted
        in the engine's ``stalls``."""
        engine = self._engine
        return await until_stored(
            lambda: engine.run_quietly(work, quiet=quiet),
            self._faults,
            give_up=self._stopping.is_set,
            stalled=functools.partial(engine.stalls.note, self.worker_id) if stalls else None,
        )

    async def commit_handing_off(
        self, work: Callable[[StoreTransaction, str, int], tuple[R, handoff.HandOff]]
    ) -> R:
        """A client's durable commit that leases what it made runnable to this worker
        (``HandOffTarget``); raises what the commit raised, with nothing leased."""
        limit = 0
        if not self._stopping.is_set():
            limit = self._reserve(0, most=HANDOFF_EXTRA_SLOTS)
            if limit == 0 and self._round is not None:
                # A claim round holds the free slots, and does not need them yet or any
                # more: this commit's Steps start in it, not in the next round. They stay
                # reserved.
                limit = self._round.lend(HANDOFF_EXTRA_SLOTS)
        return await self._then_take(
            self._engine.run_quietly(
                lambda tx: work(tx, self.worker_id, limit),
                quiet=lambda done: took_everything(done[1]),
            ),
            limit,
        )
