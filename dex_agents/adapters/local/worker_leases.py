"""How a worker keeps the leases of its running attempts: renewals and heartbeat timeouts.

Every third of a lease the worker extends, in one quiet commit that is not
fsync'd, the leases of the attempts it runs, and learns which of them a Flow
asked to cancel. A worker killed with SIGKILL simply stops renewing, and its
attempts are taken over once their leases lapse (or sooner, by its mark:
``worker_marks.py``). The same beat stops a started attempt that sent no
heartbeat within its ``heartbeat_timeout``: a failed attempt, as on Dex.

A worker that stalls past a lease (a blocked event loop, a stopped process)
may lose it. When another worker took the attempt over, the stalled run's next
heartbeat raises ``step_context.LeaseLostError``, and a heartbeat that another
task sends for it, or a live-event flush, stops the attempt's task too
(``stop_lost_run``); when the execution was leased to this worker again, the
new claim stops the old run as the new one starts.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence

from dex_agents.adapters.local import attempts, claims
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.running_attempts import RunningAttempt
from dex_agents.adapters.local.sqlite_store import StoreError
from dex_agents.adapters.local.step_context import LeaseLostError
from dex_agents.adapters.local.store_faults import StoreFaultLog
from dex_agents.ports.flow_store import StoreTransaction


class WorkerLeases:
    """Mixed into ``LocalWorker``, which provides the attributes declared here, ``_cancel``
    (which stops running attempts) and ``_cancellable`` (an attempt's task, unless it is
    done or commits its result now)."""

    worker_id: str
    _engine: LocalEngine
    _running: dict[int, RunningAttempt]
    _faults: StoreFaultLog

    def _cancel(self, ids: set[int]) -> None:
        raise NotImplementedError

    def _cancellable(self, running: RunningAttempt) -> asyncio.Task[None] | None:
        raise NotImplementedError

    async def _renew_leases(self) -> None:
        """Renew the running attempts' leases every third of a lease until cancelled; stop
        the attempts whose cancellation was requested, and the started ones gone silent."""
        engine = self._engine
        interval = engine.lease_duration.total_seconds() / 3
        failed = False  # whether the last renewal failed
        while True:
            await asyncio.sleep(interval)
            if not self._running:
                continue
            ids = list(self._running)
            try:
                cancelled = await engine.run(
                    functools.partial(self._renewed, ids=ids), durable=False
                )
            except StoreError as error:
                # The next renewal tries again; a lease that lapses meanwhile is taken over.
                self._faults.failed(error)
                failed = True
                continue
            if failed:
                self._faults.succeeded()
                failed = False
            self._cancel(cancelled)
            self._stop_silent()

    def _renewed(self, tx: StoreTransaction, ids: Sequence[int]) -> set[int]:
        # From the time it commits at: queued behind another process's write, a renewal
        # timed from when it was asked would renew for less than a lease.
        engine = self._engine
        return claims.renew_leases(
            tx, owner=self.worker_id, ids=ids, now=engine.now(), lease=engine.lease_duration
        )

    def _stop_superseded(self, key: int) -> None:
        """Stop this worker's run of execution ``key``, which a new claim of it replaces.

        A run still going when its execution is leased to this worker again lost its lease
        while the worker stalled, and a round (another worker's or its own) handed the
        execution out again. The store cannot tell the two runs apart (one owner, and the
        same attempt when the first had not started), so the old one's heartbeat would
        pass, and the Step's code after it, a tool's call, would run twice. The run that
        claims its own next phase or retry in its commit (a hand-off) is the running task,
        and one whose result commits now is left to that commit: not stopped.
        """
        running = self._running.get(key)
        if running is not None:
            self.stop_lost_run(running)

    def stop_lost_run(self, running: RunningAttempt) -> None:
        """Stop ``running``, whose lease is lost: a heartbeat found it taken, or a new claim
        of its execution replaces it.

        A heartbeat the attempt's own task sends raises ``LeaseLostError`` there; one
        another task sends (the session's background heartbeat, every 20 s while a model
        or tool call runs) would stop that task alone, and a live-event flush (every 50 ms
        while a model streams) nothing, and the call would run on to a result its commit
        drops. Not stopped: the task that calls this, or whose heartbeat's commit calls it
        (it stops by itself), and one whose result commits now (``_cancellable``), left to
        that commit.
        """
        task = self._cancellable(running)
        current = asyncio.current_task()
        if running.context is not None:
            current = running.context.sender(current)  # its own heartbeat, in a task of its own
        if task is not None and task is not current:
            running.stop_reason = LeaseLostError(
                f"{running.row.step_execution_id} attempt {running.row.attempt} lost its lease"
            )
            task.cancel()  # not asked for: it records nothing, and exports no span

    def _stop_silent(self) -> None:
        """Cancel each started attempt whose last heartbeat is older than its
        ``heartbeat_timeout``, as a failed attempt (``attempts.HeartbeatTimeoutError``)."""
        now = self._engine.now()
        for running in list(self._running.values()):
            context = running.context
            if context is not None and context.started and running.options is not None:
                silent = now - context.last_heartbeat_at
                task = self._cancellable(running)
                if silent > running.options.heartbeat_timeout and task is not None:
                    running.stop_reason = attempts.HeartbeatTimeoutError(
                        f"no heartbeat for {running.options.heartbeat_timeout}"
                    )
                    # The engine stops it, as Dex does: a failed attempt, traced as
                    # one, not a Worker closing (whose attempt runs again unseen).
                    context.cancellation_requested = True
                    task.cancel()
