"""What readers following idle sessions' Streams cost a turn of another session.

    uv run --frozen python bench/stream_followers.py [--followers N,N,...] [--turns N]

A client that follows many sessions (the console with its open streams, an app
with one event stream per user) keeps a long poll open on each session's
``AgentEvents`` Stream. For each count of ``--followers`` (0, 50 and 200 by
default), one process runs ``LocalRuntime(path, [workload.flow], workers=1)``,
opens that many idle sessions plus one active session, starts one reader per
idle session (``read_stream`` from its tail, long-polling, over and over), and
then runs ``--turns`` (40) turns of the workload in the active session, after
two untimed ones. Reported: the process's CPU time (``time.process_time``, all
threads) and the wall time per turn, and each over the run with no follower.
Each count runs in a fresh process and file, one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import workload
from count_sweep import print_counts, run_counts
from turn_child import EXPECTED_ANSWER

from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import StreamReadTimeoutError


async def _follow(runtime: LocalRuntime, session_id: str) -> None:
    client = runtime.flow_client
    token = await client.stream_tail_token(workload.flow, session_id)
    while True:
        with contextlib.suppress(StreamReadTimeoutError):
            message = await client.read_stream(
                workload.flow, session_id, token, poll_timeout=timedelta(seconds=60)
            )
            token = message.resume_token


async def measure(path: Path, followers: int, turns: int) -> dict[str, float]:
    """CPU and wall seconds per turn of the active session, with ``followers`` readers."""
    async with LocalRuntime(path, [workload.flow], workers=1) as runtime:
        sessions = runtime.sessions(workload.flow)
        for n in range(followers):
            await sessions.open_session(f"idle-{n}")
        await sessions.open_session("active")
        await sessions.wait_for_user("active")
        readers = [asyncio.create_task(_follow(runtime, f"idle-{n}")) for n in range(followers)]
        try:
            await asyncio.sleep(0.5)  # every reader is at its long poll

            async def turn(number: int) -> None:
                await sessions.send_user_message("active", workload.user_message(number))
                snapshot = await sessions.wait_for_user("active")
                if snapshot.messages[-1].text != EXPECTED_ANSWER:
                    raise RuntimeError(f"turn {number} answered {snapshot.messages[-1].text!r}")

            for number in (1, 2):
                await turn(number)
            cpu, started = time.process_time(), time.perf_counter()
            for number in range(3, turns + 3):
                await turn(number)
            return {
                "cpu": (time.process_time() - cpu) / turns,
                "wall": (time.perf_counter() - started) / turns,
            }
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--followers", default="0,50,200", help="counts of readers (0,50,200)")
    parser.add_argument("--turns", type=int, default=40, help="timed turns per count (40)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process's count
    args = parser.parse_args(argv)
    if args.one is not None:
        with tempfile.TemporaryDirectory() as directory:
            figures = asyncio.run(measure(Path(directory) / "f.sqlite3", args.one, args.turns))
        print(json.dumps(figures))
        return 0
    counts = [int(count) for count in args.followers.split(",")]
    results = run_counts(__file__, counts, ["--turns", str(args.turns)])
    print(f"a turn of one session while readers follow other, idle sessions ({args.turns} turns)")
    print_counts(
        "followers",
        counts,
        results,
        [("CPU ms/turn", "cpu", 1000, 2), ("wall ms/turn", "wall", 1000, 2)],
        [("CPU / first", "cpu"), ("wall / first", "wall")],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
