"""One session's turn with its worker in the client's process, and in a worker process beside it.

    uv run --frozen python bench/process_latency.py [--turns N] [--rounds N]

A deployment of client processes (a web server) beside worker processes
(``run_workers``) sends each user message from one process to another and the
reply back. Each round times ``--turns`` (40) scripted tool turns of one session
(``send_user_message``, then ``wait_for_user``; the first five untimed) on a
fresh file, first with ``LocalRuntime(path, [workload.flow], workers=1)``, then
with ``workers=0`` beside one ``turn_worker.py`` process, and reports each
round's median turn and the second over the first; ``--rounds`` (3) rounds
alternate which goes first. The worker process's default settings are the
engine's: it polls other processes' commits every 100 ms, and on Linux it also
sees them as they land (``wal_writes.py``).

It asserts nothing; it prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import workload
from throughput import worker_beside
from turn_child import EXPECTED_ANSWER

from dex_agents.local import LocalRuntime

UNTIMED = 5
"""Turns of each session run before the timed ones."""


async def _median_turn(runtime: LocalRuntime, turns: int) -> float:
    sessions = runtime.sessions(workload.flow)
    await sessions.open_session("latency")
    times = []
    for number in range(1, UNTIMED + turns + 1):
        started = time.perf_counter()
        if not await sessions.send_user_message("latency", workload.user_message(number)):
            raise RuntimeError(f"turn {number} refused")
        text = (await sessions.wait_for_user("latency")).messages[-1].text
        times.append(time.perf_counter() - started)
        if text != EXPECTED_ANSWER:
            raise RuntimeError(f"turn {number} answered {text!r}")
    return statistics.median(times[UNTIMED:])


async def in_process(path: Path, turns: int) -> float:
    """The median turn, in seconds, with the worker in this process."""
    async with LocalRuntime(path, [workload.flow], workers=1) as runtime:
        return await _median_turn(runtime, turns)


async def beside(path: Path, turns: int) -> float:
    """The median turn, in seconds, with this process a client beside one worker process."""
    async with LocalRuntime(path, [workload.flow], workers=0) as runtime, worker_beside(path):
        return await _median_turn(runtime, turns)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=40, help="timed turns per run (40)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both runs (3)")
    args = parser.parse_args(argv)
    print("| round | worker in this process, ms | worker process beside, ms | beside / in |")
    print("| ---: | ---: | ---: | ---: |")
    ratios = []
    with tempfile.TemporaryDirectory() as directory:
        for number in range(args.rounds):
            runs = {}
            order = ("in", "beside") if number % 2 == 0 else ("beside", "in")
            for kind in order:
                path = (Path(directory) / f"{kind}-{number}.sqlite3").resolve()
                measure = in_process if kind == "in" else beside
                runs[kind] = asyncio.run(measure(path, args.turns))
            ratio = runs["beside"] / runs["in"]
            ratios.append(ratio)
            print(
                f"| {number + 1} | {runs['in'] * 1e3:.2f} | {runs['beside'] * 1e3:.2f} "
                f"| {ratio:.2f}x |"
            )
    print(f"\nmedian of the rounds' ratios: {statistics.median(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
