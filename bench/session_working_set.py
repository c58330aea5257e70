"""What a turn costs when one process serves many sessions with long histories.

    uv run --frozen python bench/session_working_set.py [--sessions N,N,...] [--depth N]
        [--rounds N] [--same-start]

Every model call reads its session's whole conversation, and the process keeps,
per session, what it built from it (the chunks joined, the walk over earlier
turns, the model input's estimate), so the next call starts where the last one
ended. Those caches are bounded; once the sessions a process serves outgrow
them, every model call builds everything again. For each count of
``--sessions`` (1, 10 and 30 by default), one process runs
``LocalRuntime(path, [workload.flow], workers=1)``, gives each session
``--depth`` (200) turns of history one session after another, then runs
``--rounds`` (3) rounds of one turn in each session in turn, and reports, for
the first round and for the rounds after it apart, the median of those turns'
wall time and the process's CPU time per turn over them, and its resident
memory (``VmRSS``) after them, each beside the first count's. The first round
is each session's first turn since the other sessions' histories were built:
a session that was idle while many others ran, whose decoded history the
process may no longer keep. The later rounds are the steady state.
Each count runs in a fresh process and file, one after the other. The messages
are numbered across all sessions, so no two sessions share one; with
``--same-start`` every session's first message is the same (the next ones
differ), as when many people open with "hi": equal stored items decode to one
object, so the model requests of all sessions start with the same item.
With ``--counts`` it also counts, per turn of the later rounds, what the process
inflated and decoded again (``kept_counts.py``): counts, which the machine's
load does not move, where the times do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import kept_counts
import workload
from count_sweep import print_counts, run_counts
from engine_overhead import rss_bytes
from turn_child import EXPECTED_ANSWER

from dex_agents.local import LocalRuntime


async def measure(
    path: Path,
    sessions: int,
    depth: int,
    rounds: int,
    same_start: bool = False,
    counts: bool = False,
) -> dict[str, float]:
    """Median wall and mean CPU seconds of a round-robin turn, and the RSS after them."""
    async with LocalRuntime(path, [workload.flow], workers=1) as runtime:
        client = runtime.sessions(workload.flow)
        ids = [f"session-{n}" for n in range(sessions)]
        number = 0
        started_sessions: set[str] = set()

        async def turn(session_id: str) -> float:
            nonlocal number
            number += 1
            first = same_start and session_id not in started_sessions
            started_sessions.add(session_id)
            message = workload.user_message(0 if first else number)
            started = time.perf_counter()
            await client.send_user_message(session_id, message)
            snapshot = await client.wait_for_user(session_id)
            if snapshot.messages[-1].text != EXPECTED_ANSWER:
                raise RuntimeError(f"turn {number} answered {snapshot.messages[-1].text!r}")
            return time.perf_counter() - started

        for session_id in ids:
            await client.open_session(session_id)
            await client.wait_for_user(session_id)
            for _ in range(depth):
                await turn(session_id)
        # The first round: each session's first turn since the other sessions' histories
        # were built, what a session that was idle while many others ran costs at its return.
        cpu = time.process_time()
        firsts = [await turn(session_id) for session_id in ids]
        first_cpu = time.process_time() - cpu
        kept_counts.COUNTED.clear()
        cpu = time.process_time()
        walls = [await turn(session_id) for _ in range(rounds - 1) for session_id in ids]
        figures = {
            "first": statistics.median(firsts),
            "first_cpu": first_cpu / len(firsts),
            "wall": statistics.median(walls),
            "cpu": (time.process_time() - cpu) / len(walls),
            "rss": float(rss_bytes()),
        }
        if counts:
            figures.update(
                {name: float(count) / len(walls) for name, count in kept_counts.COUNTED.items()}
            )
            figures.update(kept_counts.held())
        return figures


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="1,10,30", help="counts of sessions (1,10,30)")
    parser.add_argument("--depth", type=int, default=200, help="turns of history each (200)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed turns per session, at least 2 (3)"
    )
    parser.add_argument(
        "--same-start", action="store_true", help="every session's first message is the same"
    )
    parser.add_argument(
        "--counts", action="store_true", help="count what a later turn decodes and inflates again"
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process's count
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2: the first round is reported apart")
    if args.one is not None:
        if args.counts:
            kept_counts.install()
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "s.sqlite3"
            figures = asyncio.run(
                measure(path, args.one, args.depth, args.rounds, args.same_start, args.counts)
            )
        print(json.dumps(figures))
        return 0
    counts = [int(count) for count in args.sessions.split(",")]
    extra = ["--depth", str(args.depth), "--rounds", str(args.rounds)]
    if args.same_start:
        extra.append("--same-start")
    if args.counts:
        extra.append("--counts")
    results = run_counts(__file__, counts, extra)
    same = ", every session's first message the same" if args.same_start else ""
    print(
        f"a turn in each of N sessions of {args.depth} turns, in turn ({args.rounds} rounds{same})"
    )
    print_counts(
        "sessions",
        counts,
        results,
        [
            ("first: wall ms", "first", 1000, 2),
            ("CPU ms", "first_cpu", 1000, 2),
            ("later: wall ms", "wall", 1000, 2),
            ("CPU ms", "cpu", 1000, 2),
            ("RSS MiB", "rss", 2**-20, 0),
        ],
        [("first", "first"), ("later", "wall"), ("later CPU", "cpu")],
    )
    print(
        "(first: each session's first turn after the others' histories were built; later: the"
        " rest; the last three columns over the first row's)"
    )
    if args.counts:
        print("\nper turn of the later rounds, and what each cache is charged after them")
        names = [*kept_counts.COUNTED_NAMES, "decoded held", "runs held", "walks held"]
        columns = [
            (
                name.replace(" held", " MiB"),
                name,
                2**-20 if "held" in name else 1,
                1 if "held" in name else 2,
            )
            for name in names
        ]
        for row in results.values():
            for name in names:
                row.setdefault(name, 0.0)
        print_counts("sessions", counts, results, columns, [])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
