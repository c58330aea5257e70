"""What waiting sessions cost a worker process: thousands of sessions idle between turns.

This process is the client only (``LocalRuntime(path, [flow], workers=0)``);
one worker process runs ``turn_worker.py`` with dex-agents' default settings.
The worker first idles with no session for ``idle_seconds``: its CPU time then
is the baseline. The client opens ``sessions`` sessions of the workload's Flow,
``CONCURRENT`` at a time, and waits until the Step history shows every one
waiting in ``AwaitUserMessage`` (the worker ran each session's first Step and
left it at its wait). The worker then idles again for ``idle_seconds``, with
every session waiting. Reported: the worker's CPU time over each idle window
(``/proc/<pid>/task/*/schedstat``, every thread, to the nanosecond: the clock
ticks of ``/proc/<pid>/stat`` are 10 ms, as large as the difference sought)
and its resident memory (``VmRSS``) before
the sessions, once they all wait, and after the second idle window.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import workload
from engine_overhead import rss_bytes
from throughput import process_run_seconds, worker_beside

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.flow_store import StoreTransaction

CONCURRENT = 100
"""How many ``open_session`` calls the client has in flight at once."""


@dataclass
class WaitingSessions:
    """One run's outcome."""

    sessions: int
    seconds_to_wait: float
    idle_seconds: float
    baseline_cpu_seconds: float
    waiting_cpu_seconds: float
    rss_before_bytes: int
    rss_waiting_bytes: int
    rss_after_bytes: int

    @property
    def rss_growth_bytes(self) -> int:
        """How much more memory the worker holds with every session waiting, after idling."""
        return self.rss_after_bytes - self.rss_before_bytes


def _waiting_at_first_message(tx: StoreTransaction) -> int:
    return sum(
        1
        for row in tx.list_flows()
        for execution in tx.flow_executions(row.flow_id, [ExecutionStatus.WAITING])
        if execution.step_type == "AwaitUserMessage"
    )


async def _idle_cpu(pid: int, seconds: float) -> float:
    before = process_run_seconds(pid)
    await asyncio.sleep(seconds)
    return process_run_seconds(pid) - before


async def measure_waiting_sessions(
    path: Path, sessions: int, idle_seconds: float
) -> WaitingSessions:
    """Open ``sessions`` sessions on ``path`` with one worker process, and idle beside them.

    ``path`` is absolute, so the worker's open file descriptor can be matched to it.
    """
    from dex_agents.local import LocalRuntime

    async with (
        LocalRuntime(path, [workload.flow], workers=0) as runtime,
        worker_beside(path) as worker,
    ):
        reader = SqliteFlowStore(path)
        try:
            baseline = await _idle_cpu(worker.pid, idle_seconds)
            rss_before = rss_bytes(worker.pid)
            client = runtime.sessions(workload.flow)
            gate = asyncio.Semaphore(CONCURRENT)

            async def open_one(number: int) -> None:
                async with gate:
                    await client.open_session(f"waiting-{number}")

            started = time.perf_counter()
            await asyncio.gather(*(open_one(number) for number in range(sessions)))
            while reader.read(_waiting_at_first_message) < sessions:
                if worker.poll() is not None:
                    raise RuntimeError("the worker process exited while sessions started")
                await asyncio.sleep(0.5)
            seconds_to_wait = time.perf_counter() - started
            rss_waiting = rss_bytes(worker.pid)
            waiting = await _idle_cpu(worker.pid, idle_seconds)
            rss_after = rss_bytes(worker.pid)
        finally:
            reader.close()
    return WaitingSessions(
        sessions,
        seconds_to_wait,
        idle_seconds,
        baseline,
        waiting,
        rss_before,
        rss_waiting,
        rss_after,
    )
