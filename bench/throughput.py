"""Throughput of dex-agents: many sessions at once, served by worker processes.

This process is the client only (``LocalRuntime(path, [flow], workers=0)``);
``processes`` worker processes each run ``turn_worker.py``, which is
``dex_agents.local.run_workers(path, [workload.flow])``. The client opens
``sessions`` sessions and runs one untimed warm-up turn in each (so every worker
has started and is claiming), then, timed, ``turns`` more turns per session:
every session runs its turns one after the other, all sessions at once. The
workers' CPU time over the timed part is read from ``/proc/<pid>/stat`` (user +
system, every thread), so it is the workers' alone; the client's own CPU time
(``time.process_time``) is reported beside it.

Beside busy workers an RPC may wait for the write lock. A probe process
(``rpc_probe.py``) times a write RPC every 20 ms from before the sessions
open, so its first calls, for ``ALONE`` seconds, have nothing to wait behind;
the probe and the workers time their write transactions
(``transaction_timing.py``): how long the probe's waited for the write lock,
and how long the workers' held it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import workload
from turn_child import EXPECTED_ANSWER

from dex_agents import AgentSessionClient

WORKER = Path(__file__).with_name("turn_worker.py")
_TICKS = os.sysconf("SC_CLK_TCK")

PROBE = Path(__file__).with_name("rpc_probe.py")

ALONE = 0.5
"""Seconds the probe calls with the workers idle, before the sessions open."""


@dataclass
class Throughput:
    """One throughput run's outcome."""

    processes: int
    turns: int
    seconds: float
    worker_cpu_seconds: float
    client_cpu_seconds: float
    rpc_seconds: list[float] = field(default_factory=list)
    """Each probe call that began in the timed part."""
    rpc_alone_seconds: list[float] = field(default_factory=list)
    """Each probe call that began before the sessions opened, the workers idle."""
    rpc_wait_seconds: list[float] = field(default_factory=list)
    """How long each probe call of the timed part waited for the write lock."""
    worker_write_seconds: list[float] = field(default_factory=list)
    """How long each write transaction of the workers held the write lock, over the whole run."""

    @property
    def turns_per_second(self) -> float:
        return self.turns / self.seconds

    @property
    def cpu_per_turn(self) -> float:
        return self.worker_cpu_seconds / self.turns

    @property
    def client_cpu_per_turn(self) -> float:
        return self.client_cpu_seconds / self.turns


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def process_run_seconds(pid: int) -> float:
    """How long the live threads of process ``pid`` have run on a CPU so far, to the
    nanosecond (``/proc/<pid>/task/*/schedstat``), where ``process_cpu_seconds`` counts in
    clock ticks (10 ms). A thread that ended is not counted: measure a process whose
    threads outlive the window, as a worker's do."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended while the others were read
    return total / 1e9


def holds_open(pid: int, path: Path) -> bool:
    try:
        return any(
            os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd")
        )
    except FileNotFoundError:
        return False


@contextlib.asynccontextmanager
async def worker_beside(
    path: Path, times: Path | None = None, profile: Path | None = None
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """One ``turn_worker.py`` process serving ``path``, yielded once it has the file open and
    stopped at the end: the worker a client process of a benchmark runs beside. Given
    ``times``, the worker writes its write transactions' lock times there as it exits; given
    ``profile``, its ``stack_sampler.py`` profile."""
    command = [sys.executable, str(WORKER), str(path), *([] if times is None else [str(times)])]
    if profile is not None:
        command += ["--profile", str(profile)]
    # Started from async code on purpose: Popen returns at once, and nothing else runs yet.
    worker = subprocess.Popen(command)  # noqa: ASYNC220
    try:
        while not holds_open(worker.pid, path):
            if worker.poll() is not None:
                raise RuntimeError("the worker process exited before it opened the database")
            await asyncio.sleep(0.05)
        yield worker
    finally:
        worker.terminate()
        worker.wait(timeout=30)


async def session_turns(
    sessions: AgentSessionClient, session_id: str, first: int, last: int
) -> None:
    """Run turns ``first`` to ``last`` of ``session_id``, checking each answer."""
    for number in range(first, last + 1):
        if not await sessions.send_user_message(session_id, workload.user_message(number)):
            raise RuntimeError(f"{session_id}: turn {number} refused")
        text = (await sessions.wait_for_user(session_id)).messages[-1].text
        if text != EXPECTED_ANSWER:
            raise RuntimeError(f"{session_id}: turn {number} answered {text!r}")


async def open_sessions(sessions: AgentSessionClient, prefix: str, count: int) -> list[str]:
    """Open ``count`` sessions named ``<prefix>-<n>``, one after another; return their IDs."""
    ids = [f"{prefix}-{n}" for n in range(count)]
    for session_id in ids:
        await sessions.open_session(session_id)
    return ids


async def all_sessions_turns(
    sessions: AgentSessionClient, ids: list[str], first: int, last: int
) -> None:
    """Run turns ``first`` to ``last`` of every session in ``ids``, all sessions at once."""
    await asyncio.gather(*(session_turns(sessions, session_id, first, last) for session_id in ids))


async def measure_throughput(path: Path, processes: int, sessions: int, turns: int) -> Throughput:
    """Run ``sessions`` x ``turns`` turns against ``processes`` worker processes on ``path``.

    ``path`` is absolute, so a worker's open file descriptor can be matched to it.
    """
    from dex_agents.local import LocalRuntime

    times = [path.with_name(f"{path.name}-worker-{n}.times") for n in range(processes)]
    async with (
        LocalRuntime(path, [workload.flow], workers=0) as runtime,
        contextlib.AsyncExitStack() as beside,
    ):
        workers = [await beside.enter_async_context(worker_beside(path, each)) for each in times]
        probe_times = path.with_name(f"{path.name}-probe.times")
        # Started from async code on purpose: Popen returns at once.
        probe = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, str(PROBE), str(path), str(probe_times)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert probe.stdout is not None
            if await asyncio.to_thread(probe.stdout.readline) != "ready\n":
                raise RuntimeError("the RPC probe exited before its session opened")
            await asyncio.sleep(ALONE)
            alone_until = time.monotonic()
            client = runtime.sessions(workload.flow)
            ids = await open_sessions(client, "throughput", sessions)
            await all_sessions_turns(client, ids, 1, 1)
            cpu = sum(process_cpu_seconds(worker.pid) for worker in workers)
            client_cpu = time.process_time()
            started, timed_from = time.perf_counter(), time.monotonic()
            await all_sessions_turns(client, ids, 2, turns + 1)
            seconds = time.perf_counter() - started
            timed_until = time.monotonic()
            cpu = sum(process_cpu_seconds(worker.pid) for worker in workers) - cpu
            client_cpu = time.process_time() - client_cpu
        finally:
            probe.terminate()
            probe.wait(timeout=30)
    calls = [tuple(map(float, line.split())) for line in probe_times.read_text().splitlines()]
    rpc_alone_seconds = [took for began, took, _ in calls if began < alone_until]
    timed_calls = [call for call in calls if timed_from <= call[0] < timed_until]
    rpc_seconds = [took for _, took, _ in timed_calls]
    rpc_wait_seconds = [waited for _, _, waited in timed_calls]
    worker_write_seconds = [
        float(line) for each in times if each.exists() for line in each.read_text().split()
    ]
    return Throughput(
        processes,
        sessions * turns,
        seconds,
        cpu,
        client_cpu,
        rpc_seconds,
        rpc_alone_seconds,
        rpc_wait_seconds,
        worker_write_seconds,
    )


async def profile_worker(path: Path, sessions: int, turns: int) -> dict[str, Any]:
    """Run ``sessions`` x ``turns`` turns against one worker process that runs under
    ``stack_sampler.py``, after a warm-up turn each; return its profile (``turn_worker.py``)
    with ``"turns"``, the turns it covers (the warm-up's among them)."""
    from dex_agents.local import LocalRuntime

    out = path.with_name(f"{path.name}-worker.profile.json")
    async with (
        LocalRuntime(path, [workload.flow], workers=0) as runtime,
        worker_beside(path, profile=out),
    ):
        client = runtime.sessions(workload.flow)
        ids = await open_sessions(client, "profiled", sessions)
        await all_sessions_turns(client, ids, 1, turns + 1)
    profile: dict[str, Any] = json.loads(out.read_text())
    profile["turns"] = sessions * (turns + 1)
    return profile
