"""A durable agent turn on dex-agents, side by side with LangGraph and DBOS, in one run.

Run it from the repository root, with the ``bench`` dependency group installed:

    uv run --frozen --group bench python bench/turns.py [--turns N] [--quick]

The workload (``workload.py``): one ~200-character user message, the model
(a script, no network) calls one read tool, then answers. Every system runs it
with its worker in the same process, on SQLite in WAL mode with each durable
commit synced before it returns (or in memory), each in a process of its own
(``turn_child.py``). The systems take turns in batches of ``--batch`` turns, so
a change in the machine's load falls on all of them alike.

It prints, per system: the median turn latency of the first, middle and last
50 turns, the growth per turn and the ratio dex-agents/peer per window; the
fsync calls per turn, counted with strace (``fsync_count.py``); the storage by
table after the run next to the conversation's JSON size; dex-agents' no-op
Step next to one fsync'd commit (``engine_overhead.py``); the throughput of 50
sessions x 10 turns with one and with two worker processes (``throughput.py``)
and the workers' CPU per turn, with how long ``send_user_message`` took beside
the busy workers; what 10,000 sessions waiting between turns cost a worker
process (``waiting_sessions.py``). Then each of the issue's goals, met or not met
(``turn_report.py``). ``--profile N`` instead runs N dex-agents turns under a
stack sampler of every thread (``stack_sampler.py``), then N more under cProfile,
and prints where the time goes; ``--profile-worker N`` samples the worker
process of a throughput run of N turns a session. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import engine_overhead
import fsync_count
import throughput
import turn_report
import waiting_sessions
import workload
from stack_sampler import StackSampler, most
from turn_child import SYSTEMS, DexAgents
from turn_report import Results, SystemRun

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore

CHILD = Path(__file__).with_name("turn_child.py")


def child_command(system: str, path: Path | None) -> list[str]:
    """The command line of a ``turn_child.py`` process for ``system``."""
    return [sys.executable, str(CHILD), system, *([str(path)] if path else [])]


class Child:
    """A ``turn_child.py`` process and the pipe to it."""

    def __init__(self, system: str, path: Path | None) -> None:
        self.system = system
        self.process = subprocess.Popen(
            child_command(system, path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def ask(self, line: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.read()

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError(f"{self.system} stopped (exit code {self.process.wait()})")
        result: dict[str, Any] = json.loads(reply)
        return result

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=120)


def run_latencies(
    directory: Path, systems: Sequence[str], turns: int, batch: int
) -> dict[str, SystemRun]:
    """Run ``turns`` turns on every system, interleaved ``batch`` turns at a time."""
    children = []
    runs = {system: SystemRun() for system in systems}
    try:
        for system in systems:
            path = (directory / f"{system}.sqlite3").resolve() if SYSTEMS[system][1] else None
            children.append(Child(system, path))
        for child in children:
            child.read()  # ready
        started = time.monotonic()
        report_every = max(turns // 10, batch)
        for index, first in enumerate(range(1, turns + 1, batch)):
            last = min(first + batch - 1, turns)
            shift = index % len(children)  # no system always goes first
            for child in children[shift:] + children[:shift]:
                reply = child.ask(f"run {first} {last}")
                runs[child.system].latencies += reply["latencies"]
                runs[child.system].cpu += reply["cpu"]
            if last // report_every != (first - 1) // report_every or last == turns:
                elapsed = time.monotonic() - started
                print(f"  latency: {last}/{turns} turns, {elapsed:.0f} s", file=sys.stderr)
        for child in children:
            runs[child.system].storage = child.ask("finish")["storage"]
    finally:
        for child in children:
            child.close()
    return runs


def count_all_fsyncs(
    directory: Path, systems: Sequence[str], warm_up: int, turns: int
) -> dict[str, fsync_count.FsyncCount | str]:
    """Each system's fsync calls over ``turns`` turns, each in an strace'd process."""
    if fsync_count.strace_path() is None:
        return dict.fromkeys(systems, "not counted: strace is not installed")
    counts: dict[str, fsync_count.FsyncCount | str] = {}
    for system in systems:
        where = (directory / f"fsync-{system}").resolve()
        where.mkdir()
        path = where / "db.sqlite3" if SYSTEMS[system][1] else None
        print(f"  fsyncs: {system}", file=sys.stderr)
        counts[system] = fsync_count.count_fsyncs(
            child_command(system, path), path, where, warm_up, turns
        )
    return counts


async def measure_engine(directory: Path, steps: int, commits: int, results: Results) -> None:
    """The no-op Step and the fsync'd 1 KiB commit of ``engine_overhead.py``.

    The commit is timed before and after the Steps, on fresh files, and the two
    means are averaged: this disk's fsync time drifts by several times within minutes.
    """
    (directory / "before").mkdir()
    (directory / "after").mkdir()
    before = engine_overhead.measure_floor(directory / "before", commits, 1024)
    loop = await engine_overhead.measure_loop(SqliteFlowStore(directory / "loop.sqlite3"), steps)
    after = engine_overhead.measure_floor(directory / "after", commits, 1024)
    results.floors = (before, after)
    results.noop_step = loop.seconds_per_step
    results.noop_writes = loop.writes_per_step


def print_sampled(inclusive: dict[str, float], own: dict[str, float], turns: int, top: int) -> None:
    """Print a ``stack_sampler.py`` profile's top functions, inclusive and self, in ms a turn."""
    print(f"\ntop {top} functions on a busy thread's stack, ms/turn (inclusive, self):")
    for label, spent in most(inclusive, top):
        print(f"  {spent / turns * 1000:7.2f} {own.get(label, 0.0) / turns * 1000:7.2f}  {label}")
    print(f"\ntop {top} functions on top of a busy thread's stack, ms/turn (self, inclusive):")
    for label, spent in most(own, top):
        print(
            f"  {spent / turns * 1000:7.2f} {inclusive.get(label, 0.0) / turns * 1000:7.2f}  {label}"
        )


async def profile_worker(directory: Path, sessions: int, turns: int, top: int) -> None:
    """Profile the worker process of a throughput run of ``sessions`` x ``turns``; print the top."""
    sampled = await throughput.profile_worker(directory / "profile-worker.sqlite3", sessions, turns)
    count = sampled["turns"]
    print(
        f"one worker process, {sessions} sessions x {turns + 1} turns (the first a warm-up), "
        f"sampled over its whole run, the sessions' starts too: "
        f"{sampled['elapsed'] / count * 1000:.2f} ms/turn of its run, of which some thread was "
        f"busy {sampled['busy'] / count * 1000:.2f} ms/turn"
    )
    print_sampled(sampled["inclusive"], sampled["self"], count, top)


async def profile(directory: Path, turns: int, top: int) -> None:
    """Run dex-agents on SQLite for ``turns`` turns twice, under each profiler; print the top."""
    system = DexAgents(directory / "profile.sqlite3")
    await system.open()
    for number in range(1, 6):
        await system.turn(number)
    with StackSampler() as sampler:
        for number in range(6, turns + 6):
            await system.turn(number)
    print(
        f"dex-agents on SQLite, {turns} turns, every thread sampled: "
        f"{sampler.elapsed / turns * 1000:.1f} ms/turn, of which some thread was busy "
        f"{sampler.busy / turns * 1000:.1f} ms/turn (summed over threads) and the sampler "
        f"{sampler.overhead / turns * 1000:.2f} ms/turn ({sampler.samples / turns:.1f} samples a turn)"
    )
    print_sampled(sampler.inclusive, sampler.self_time, turns, top)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for number in range(turns + 6, 2 * turns + 6):
        await system.turn(number)
    profiler.disable()
    seconds = time.perf_counter() - started
    await system.close()
    print(
        f"\nthe next {turns} turns under cProfile (the event loop's thread only): "
        f"{seconds / turns * 1000:.1f} ms/turn"
    )
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("cumulative").print_stats(top)
    print(f"top {top} by cumulative time:")
    print(text.getvalue().split("\n\n", 2)[-1].rstrip())


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, help="turns per system (1000; 200 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a short run: 200 turns, less of all")
    parser.add_argument("--batch", type=int, default=10, help="turns per system at a time (10)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated systems")
    parser.add_argument("--fsync-turns", type=int, help="turns counted under strace (50; 20)")
    parser.add_argument("--sessions", type=int, default=50, help="throughput sessions (50)")
    parser.add_argument("--session-turns", type=int, default=10, help="turns per session (10)")
    parser.add_argument(
        "--throughput-rounds",
        type=int,
        default=3,
        help="rounds of one and two worker processes, alternating (3)",
    )
    parser.add_argument("--steps", type=int, help="no-op Steps (300; 100 with --quick)")
    parser.add_argument("--skip", default="", help="skip phases: fsync,engine,throughput,waiting")
    parser.add_argument(
        "--waiting-sessions", type=int, default=10_000, help="waiting sessions (10,000)"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=10.0, help="idle window beside them (10 s)"
    )
    parser.add_argument("--profile", type=int, metavar="N", help="only profile N dex-agents turns")
    parser.add_argument(
        "--profile-worker",
        type=int,
        metavar="N",
        help="only profile the worker process of --sessions x N throughput turns",
    )
    parser.add_argument("--profile-top", type=int, default=30, help="functions listed (30)")
    args = parser.parse_args(argv)
    turns = args.turns or (200 if args.quick else 1000)
    fsync_turns = args.fsync_turns or (20 if args.quick else 50)
    steps = args.steps or (100 if args.quick else 300)
    systems = [name for name in args.systems.split(",") if name]
    skip = set(args.skip.split(","))
    unknown = [name for name in systems if name not in SYSTEMS]
    if unknown or turns < 3 or args.batch < 1:
        parser.error(f"unknown systems {unknown}; --turns at least 3, --batch at least 1")

    with tempfile.TemporaryDirectory(prefix="dex-agents-turns-") as name:
        directory = Path(name)
        if args.profile:
            asyncio.run(profile(directory, args.profile, args.profile_top))
            return 0
        if args.profile_worker:
            asyncio.run(
                profile_worker(directory, args.sessions, args.profile_worker, args.profile_top)
            )
            return 0
        results = Results(turns=turns, batch=args.batch, runs={}, machine=turn_report.machine())
        # First, while no other phase has left dirty pages for the disk to write back.
        if "engine" not in skip:
            print("engine: floor and no-op Step", file=sys.stderr)
            asyncio.run(measure_engine(directory, steps, 300, results))
        print(f"latency: {turns} turns on {', '.join(systems)}", file=sys.stderr)
        results.runs = run_latencies(directory, systems, turns, args.batch)
        for file in directory.glob("*.sqlite3*"):  # measured; LangGraph's are large
            file.unlink()
        if "fsync" not in skip:
            results.fsync_warm_up, results.fsync_turns = 3, fsync_turns
            results.fsyncs = count_all_fsyncs(directory, systems, 3, fsync_turns)
        if "throughput" not in skip:
            results.sessions, results.session_turns = args.sessions, args.session_turns
            # A run's 500 turns take two seconds, and the machine's speed drifts by more than
            # a change moves them: one and two workers alternate, round by round, and each
            # round's two runs make one ratio.
            for round_number in range(max(1, args.throughput_rounds)):
                order = (1, 2) if round_number % 2 == 0 else (2, 1)
                for processes in order:
                    print(
                        f"throughput: round {round_number + 1}, {processes} worker processes",
                        file=sys.stderr,
                    )
                    path = directory / f"throughput-{round_number}-{processes}.sqlite3"
                    results.throughput_runs.append(
                        asyncio.run(
                            throughput.measure_throughput(
                                path.resolve(), processes, args.sessions, args.session_turns
                            )
                        )
                    )
            results.throughput = turn_report.median_runs(results.throughput_runs)
        if "waiting" not in skip:
            print(f"waiting: {args.waiting_sessions} sessions", file=sys.stderr)
            results.waiting = asyncio.run(
                waiting_sessions.measure_waiting_sessions(
                    (directory / "waiting.sqlite3").resolve(),
                    args.waiting_sessions,
                    args.idle_seconds,
                )
            )
        results.load_end = turn_report.load_average()
    turn_report.print_report(sys.stdout, results, workload.conversation_json_bytes(turns))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
