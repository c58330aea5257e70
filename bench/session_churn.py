"""What a long-lived process keeps as sessions come and go: memory, timers, tasks, threads, files.

    uv run --frozen python bench/session_churn.py [--batches N] [--sessions N] [--traced]

A worker or ``dex-agents serve`` runs for days over thousands of sessions, and
whatever it keeps per session must be bounded or go when the session ends. One
process runs ``LocalRuntime(path, [workload.flow], workers=1)`` and, ``--batches``
(8) times, ``--sessions`` (250) new sessions one after another, each: started
with the workload's message and waited for, followed by a reader that reads its
first three events and leaves, a long poll on its Stream that is cancelled, a
``wait_for_user`` that times out, a second turn, and ``stop_flow``. After each
batch it prints the process's resident memory (``VmRSS``), with ``--traced``
the memory ``tracemalloc`` traces (slower; at the end, the source files whose
allocations hold the most of it), the event loop's timer heap (live and
cancelled handles), its tasks, the threads and the open file descriptors.
The bounded caches fill over the first thousands of sessions (see
``session_working_set.py``); a count that grows with every batch after that is
a leak. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import tempfile
import threading
import tracemalloc
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import workload
from engine_overhead import rss_bytes

from dex_agents import SessionWaitTimeoutError
from dex_agents.local import LocalRuntime


async def one_session(runtime: LocalRuntime, session_id: str, number: int) -> None:
    """One session's life: two turns, a reader that leaves, two waits given up, a stop."""
    client = runtime.sessions(workload.flow)
    streams = runtime.flow_client
    await client.start_session(session_id, workload.user_message(number))
    await client.wait_for_user(session_id)
    token = ""
    for _ in range(3):
        message = await streams.read_stream(
            workload.flow, session_id, token, poll_timeout=timedelta(0)
        )
        token = message.resume_token
    tail = await streams.stream_tail_token(workload.flow, session_id)
    poll = asyncio.ensure_future(streams.read_stream(workload.flow, session_id, tail))
    await asyncio.sleep(0)
    poll.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await poll
    with contextlib.suppress(SessionWaitTimeoutError):
        await client.wait_for_user(session_id, timeout=timedelta(milliseconds=1))
    await client.send_user_message(session_id, workload.user_message(number + 1))
    await client.wait_for_user(session_id)
    await streams.stop_flow(session_id)


async def run(path: Path, batches: int, sessions: int, traced: bool) -> None:
    """Run the batches and print a row after each."""
    loop = asyncio.get_running_loop()
    print(
        "| sessions | RSS MiB | traced MiB | timers live | timers cancelled | tasks | threads | fds |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    async with LocalRuntime(path, [workload.flow], workers=1) as runtime:
        for batch in range(batches):
            for n in range(sessions):
                number = batch * sessions + n
                await one_session(runtime, f"session-{number}", 2 * number)
            gc.collect()
            heap = list(loop._scheduled)  # type: ignore[attr-defined]
            cancelled = sum(handle.cancelled() for handle in heap)
            shown = f"{tracemalloc.get_traced_memory()[0] / 2**20:.1f}" if traced else "-"
            print(
                f"| {(batch + 1) * sessions} | {rss_bytes() / 2**20:.1f} | {shown} "
                f"| {len(heap) - cancelled} | {cancelled} | {len(asyncio.all_tasks())} "
                f"| {threading.active_count()} | {len(os.listdir('/proc/self/fd'))} |",
                flush=True,
            )
        if traced:  # while the runtime is open, with what its store keeps
            for stat in tracemalloc.take_snapshot().statistics("filename")[:8]:
                print(f"    {stat.size / 2**20:6.1f} MiB  {stat.traceback[0].filename}")


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments and run the benchmark in a fresh file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=250)
    parser.add_argument("--traced", action="store_true")
    args = parser.parse_args(argv)
    if args.traced:
        tracemalloc.start()
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(run(Path(directory) / "churn.db", args.batches, args.sessions, args.traced))


if __name__ == "__main__":
    main()
