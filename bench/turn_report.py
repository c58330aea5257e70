"""The tables and goals that ``bench/turns.py`` prints, from the figures it measured."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO

from fsync_count import FsyncCount
from throughput import Throughput
from waiting_sessions import WaitingSessions

LABELS = {
    "dex-sqlite": "dex-agents, SQLite",
    "dex-memory": "dex-agents, in memory",
    "langgraph-sqlite": "LangGraph + SqliteSaver",
    "langgraph-sqlite-sync": "LangGraph + SqliteSaver, durability=sync",
    "langgraph-memory": "LangGraph + InMemorySaver",
    "dbos-sqlite": "DBOS, SQLite",
}
# (dex-agents system, peer): the ratios printed per window.
RATIOS = (
    ("dex-sqlite", "langgraph-sqlite"),
    ("dex-sqlite", "langgraph-sqlite-sync"),
    ("dex-sqlite", "dbos-sqlite"),
    ("dex-memory", "langgraph-memory"),
    ("dex-sqlite", "langgraph-memory"),
)


@dataclass
class SystemRun:
    """One system's turns: each turn's latency, the process's CPU time, the file it left."""

    latencies: list[float] = field(default_factory=list)
    cpu: float = 0.0
    storage: dict[str, Any] | None = None


@dataclass
class Results:
    """Everything one run of ``turns.py`` measured."""

    turns: int
    batch: int
    runs: dict[str, SystemRun]
    fsync_warm_up: int = 0
    fsync_turns: int = 0
    fsyncs: dict[str, FsyncCount | str] = field(default_factory=dict)
    floors: tuple[float, float] | None = None  # before and after the no-op Steps
    noop_step: float | None = None
    noop_writes: float | None = None
    throughput: list[Throughput] = field(default_factory=list)
    """The median run (by turns a second) of each number of worker processes."""
    throughput_runs: list[Throughput] = field(default_factory=list)
    """Every throughput run, in the order they ran: rounds of one and two worker processes."""
    sessions: int = 0
    session_turns: int = 0
    waiting: WaitingSessions | None = None
    machine: list[str] = field(default_factory=list)
    load_end: str = ""

    @property
    def floor(self) -> float | None:
        """One fsync'd commit: the mean of the times before and after the no-op Steps."""
        return None if self.floors is None else sum(self.floors) / 2


# ---------------------------------------------------------------------------
# Figures


def windows(turns: int, size: int = 50) -> list[tuple[int, int]]:
    """The first, middle and last ``size`` turns (1-50, 451-500, 951-1000 of 1000), 1-based."""
    size = max(1, min(size, turns // 3))
    middle = max(turns // 2, 2 * size)
    return [(1, size), (middle - size + 1, middle), (turns - size + 1, turns)]


def window_medians(latencies: Sequence[float], turns: int) -> list[float]:
    """The median latency of each of ``windows(turns)``."""
    return [statistics.median(latencies[first - 1 : last]) for first, last in windows(turns)]


def growth_per_turn(latencies: Sequence[float], turns: int) -> float:
    """The change in median latency from the first window to the last, per turn between them."""
    (f0, f1), _, (l0, l1) = windows(turns)
    first, _, last = window_medians(latencies, turns)
    return (last - first) / max((l0 + l1) / 2 - (f0 + f1) / 2, 1)


def machine() -> list[str]:
    """The date, the CPUs, the disk of the temporary files, the load, the versions."""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "?",
    )
    versions = ", ".join(
        f"{name} {version(name)}"
        for name in ("dex-agents", "langgraph", "langgraph-checkpoint-sqlite", "dbos")
    )
    return [
        f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"machine: {os.cpu_count()} CPUs ({model}), {disk_of(Path(tempfile.gettempdir()))}",
        f"load average at start: {load_average()}",
        f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {versions}",
        f"dex-agents tree: {source_tree()}",
    ]


def source_tree() -> str:
    """The commit checked out, and whether ``dex_agents/`` has uncommitted changes."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("log", "-1", "--format=%h %cd", "--date=format:%Y-%m-%d %H:%M")
    if not commit:
        return "not a git checkout"
    dirty = git("status", "--porcelain", "--", "dex_agents")
    return f"commit {commit}" + (", with uncommitted changes in dex_agents/" if dirty else "")


def load_average() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{n:.2f}" for n in os.getloadavg())


def disk_of(path: Path) -> str:
    """The device, file system and rotational flag of the mount that holds ``path``."""
    best = ("?", "/", "?")
    for line in Path("/proc/mounts").read_text().splitlines():
        device, mount, kind = line.split()[:3]
        if str(path.resolve()).startswith(mount) and len(mount) >= len(best[1]):
            best = (device, mount, kind)
    device, mount, kind = best
    flag = Path(f"/sys/block/{Path(device).name}/queue/rotational")
    media = ""
    if flag.exists():
        media = ", rotational" if flag.read_text().strip() == "1" else ", non-rotational"
    return f"temporary files on {device} ({kind} at {mount}{media})"


# ---------------------------------------------------------------------------
# Printing


def _table(out: TextIO, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[n]) for row in [header, *rows]) for n in range(len(header))]
    for row in [header, ["-" * width for width in widths], *rows]:
        cells = [
            cell.ljust(widths[n]) if n == 0 else cell.rjust(widths[n]) for n, cell in enumerate(row)
        ]
        print("  ".join(cells).rstrip(), file=out)
    print(file=out)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def _kib(size: float) -> str:
    return f"{size / 1024:,.0f} KiB"


def print_latency(out: TextIO, results: Results) -> None:
    turns = results.turns
    names = [f"{first}-{last}" for first, last in windows(turns)]
    print(
        f"turn latency, median per window, ms ({turns} turns, systems interleaved "
        f"{results.batch} turns at a time):",
        file=out,
    )
    rows = []
    for system, run in results.runs.items():
        medians = window_medians(run.latencies, turns)
        rows.append(
            [
                LABELS[system],
                *(_ms(m) for m in medians),
                f"{growth_per_turn(run.latencies, turns) * 1e6:+.1f}",
                f"{medians[2] / medians[0]:.2f}x",
                _ms(run.cpu / turns),
            ]
        )
    header = ["system", *names, "growth us/turn", "last/first", "CPU ms/turn"]
    _table(out, header, rows)
    print("ratio dex-agents / peer, per window (below 1: dex-agents is faster):", file=out)
    rows = []
    for ours, peer in RATIOS:
        if ours in results.runs and peer in results.runs:
            a = window_medians(results.runs[ours].latencies, turns)
            b = window_medians(results.runs[peer].latencies, turns)
            rows.append(
                [
                    f"{LABELS[ours]} / {LABELS[peer]}",
                    *(f"{x / y:.2f}" for x, y in zip(a, b, strict=True)),
                ]
            )
    _table(out, ["ratio", *names], rows)


def print_fsyncs(out: TextIO, results: Results) -> None:
    print(
        f"fsync calls per turn, counted with strace over {results.fsync_turns} turns after "
        f"{results.fsync_warm_up} warm-up turns:",
        file=out,
    )
    rows = []
    for system, count in results.fsyncs.items():
        if isinstance(count, str):
            rows.append([LABELS[system], count, "", "", "", ""])
            continue
        rows.append(
            [
                LABELS[system],
                f"{count.per_turn():.2f}",
                *(f"{count.per_turn(kind):.2f}" for kind in ("commit", "wal header", "checkpoint")),
                f"{count.per_turn('other'):.2f}",
            ]
        )
    _table(out, ["system", "all", "commit", "wal header", "checkpoint", "other"], rows)


def print_storage(out: TextIO, results: Results, json_bytes: int) -> None:
    print(
        f"storage after {results.turns} turns; the conversation as JSON is "
        f"{_kib(json_bytes)} ({json_bytes:,} B):",
        file=out,
    )
    rows = []
    details = []
    for system, run in results.runs.items():
        storage = run.storage
        if storage is None:
            continue
        files = storage["files"]
        rows.append(
            [
                LABELS[system],
                _kib(files.get("db", 0)),
                _kib(files.get("-wal", 0)),
                _kib(storage["used_bytes"]),
                f"{storage['used_bytes'] / json_bytes:.2f}x",
                storage["journal"],
            ]
        )
        tables = ", ".join(
            f"{name} {_kib(pages)} ({_kib(payload)} payload)"
            for name, pages, payload in storage["tables"][:6]
            if pages >= 8192
        )
        details.append(f"  {LABELS[system]}: {tables or 'dbstat is not compiled in'}")
    _table(out, ["system", "db file", "WAL file", "pages in use", "/ JSON", "file format"], rows)
    print("largest tables, with their indexes (dbstat):", file=out)
    for line in details:
        print(line, file=out)
    print(file=out)


def print_engine(out: TextIO, results: Results) -> None:
    floor = results.floor
    if results.floors is None or floor is None or results.noop_step is None:
        return
    print("dex-agents engine, SQLite (engine_overhead.py):", file=out)
    before, after = results.floors
    rows = [
        ["one fsync'd commit of a 1 KiB row, before the Steps", _ms(before)],
        ["one fsync'd commit of a 1 KiB row, after the Steps", _ms(after)],
        ["one no-op Step", _ms(results.noop_step)],
        ["no-op Step / commit (the mean of before and after)", f"{results.noop_step / floor:.2f}x"],
        ["write transactions per no-op Step", f"{results.noop_writes or 0:.2f}"],
    ]
    _table(out, ["measure", "ms"], rows)


def print_throughput(out: TextIO, results: Results) -> None:
    if not results.throughput:
        return
    print(
        f"dex-agents throughput, {results.sessions} sessions x {results.session_turns} turns, "
        "client in this process, workers in worker processes (run_workers):",
        file=out,
    )
    cpus = len(os.sched_getaffinity(0))
    rows = [
        [
            f"{run.processes} worker process{'es' if run.processes > 1 else ''}",
            f"{run.turns_per_second:.1f}",
            f"{run.seconds:.2f}",
            _ms(run.cpu_per_turn),
            _ms(run.client_cpu_per_turn),
            f"{cpu_ceiling(cpus, run.cpu_per_turn, run.client_cpu_per_turn):.1f}",
        ]
        for run in results.throughput
    ]
    header = ["workers", "turns/s", "seconds", "worker CPU ms/turn", "client CPU ms/turn"]
    _table(out, [*header, f"{cpus}-CPU ceiling turns/s"], rows)
    print(
        f"(the ceiling: {cpus} CPUs over the CPU a turn takes in the workers and the client "
        "together; no number of worker processes can pass it on this machine)",
        file=out,
    )
    ratios = two_over_one(results)
    if len(ratios) > 1:
        for processes in (1, 2):
            rates = [
                f"{run.turns_per_second:.1f}"
                for run in results.throughput_runs
                if run.processes == processes
            ]
            workers = f"{processes} worker process{'es' if processes > 1 else ''}"
            print(f"turns/s, {workers}, round by round: {', '.join(rates)}", file=out)
        print(
            f"two over one, round by round: {', '.join(f'{ratio:.2f}x' for ratio in ratios)} "
            f"(median {statistics.median(ratios):.2f}x); each row above is its median run",
            file=out,
        )


def median_runs(runs: Sequence[Throughput]) -> list[Throughput]:
    """The median run (by turns a second; the lower of two middle ones) of each number of
    worker processes, fewest processes first."""
    chosen = []
    for processes in sorted({run.processes for run in runs}):
        same = sorted(
            (run for run in runs if run.processes == processes),
            key=lambda run: run.turns_per_second,
        )
        chosen.append(same[(len(same) - 1) // 2])
    return chosen


def two_over_one(results: Results) -> list[float]:
    """Each round's two-worker turns a second over its one-worker turns a second."""
    ones = [run for run in results.throughput_runs if run.processes == 1]
    twos = [run for run in results.throughput_runs if run.processes == 2]
    return [
        two.turns_per_second / one.turns_per_second for one, two in zip(ones, twos, strict=True)
    ]


def cpu_ceiling(cpus: int, worker_cpu: float, client_cpu: float) -> float:
    """The most turns a second ``cpus`` CPUs can run when a turn takes this CPU, in seconds."""
    per_turn = worker_cpu + client_cpu
    return cpus / per_turn if per_turn > 0 else float("inf")


HAND_OVER = 0.001
"""How long after a commit a writer waiting for the lock may take to begin: its longest pause."""

IDLE_NOISE = 0.001
"""The share of one CPU that waiting sessions may add to an idle worker's and still cost none:
the worker's own polls move its idle CPU time by about that much from one window to the next."""


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_rpc_waits(out: TextIO, results: Results) -> None:
    runs = [
        run
        for run in results.throughput
        if run.rpc_seconds and run.rpc_alone_seconds and run.rpc_wait_seconds
    ]
    if not runs:
        return
    print(
        "a write RPC (update_session_settings) from an idle client process beside the busy"
        " workers of the throughput run, and the workers'"
        " write transactions, ms:",
        file=out,
    )
    rows = [
        [
            f"{run.processes} worker process{'es' if run.processes > 1 else ''}",
            _ms(statistics.median(run.rpc_alone_seconds)),
            _ms(statistics.median(run.rpc_seconds)),
            _ms(_quantile(run.rpc_seconds, 0.99)),
            _ms(max(run.rpc_seconds)),
            _ms(statistics.median(run.rpc_wait_seconds)),
            _ms(max(run.rpc_wait_seconds)),
            _ms(statistics.median(run.worker_write_seconds)) if run.worker_write_seconds else "-",
            _ms(max(run.worker_write_seconds)) if run.worker_write_seconds else "-",
        ]
        for run in runs
    ]
    _table(
        out,
        [
            "workers",
            "RPC alone",
            "beside: median",
            "p99",
            "max",
            "waited: median",
            "max",
            "worker held: median",
            "max",
        ],
        rows,
    )


def print_waiting(out: TextIO, results: Results) -> None:
    run = results.waiting
    if run is None:
        return
    print(
        f"{run.sessions:,} sessions waiting for a message, one worker process (run_workers):",
        file=out,
    )
    rows = [
        ["time to open them all and reach their waits", f"{run.seconds_to_wait:.1f} s"],
        [
            "worker RSS before / all waiting / after idling",
            f"{run.rss_before_bytes / 2**20:.1f} / {run.rss_waiting_bytes / 2**20:.1f}"
            f" / {run.rss_after_bytes / 2**20:.1f} MiB",
        ],
        [
            f"worker CPU over {run.idle_seconds:g} s idle, no session",
            f"{run.baseline_cpu_seconds * 1000:.0f} ms",
        ],
        [
            f"worker CPU over {run.idle_seconds:g} s idle, all waiting",
            f"{run.waiting_cpu_seconds * 1000:.0f} ms",
        ],
    ]
    _table(out, ["measure", "figure"], rows)


def goals(results: Results, json_bytes: int) -> list[tuple[str, str, bool | None]]:
    """The issue's goals: (goal, figure, met), ``None`` when the run did not measure it."""
    found: list[tuple[str, str, bool | None]] = []
    dex = results.runs.get("dex-sqlite")
    peer = results.runs.get("langgraph-sqlite")
    (f0, f1), _, (l0, l1) = windows(results.turns)
    if dex is not None:
        first, _, last = window_medians(dex.latencies, results.turns)
        found.append((f"turns {f0}-{f1} at most 5 ms", f"{_ms(first)} ms", first <= 0.005))
        if peer is not None:
            speedup = window_medians(peer.latencies, results.turns)[0] / first
            found.append(
                (
                    f"turns {f0}-{f1} at least 2.5x faster than LangGraph + SqliteSaver",
                    f"{speedup:.2f}x as fast",
                    speedup >= 2.5,
                )
            )
        found.append(
            (
                f"flat: turns {l0}-{l1} at most 1.2x turns {f0}-{f1}",
                f"{last / first:.2f}x",
                last <= 1.2 * first,
            )
        )
        if dex.storage is not None:
            ratio = dex.storage["used_bytes"] / json_bytes
            found.append(
                (
                    f"storage after {results.turns} turns at most 2x the message JSON",
                    f"{ratio:.2f}x",
                    ratio <= 2,
                )
            )
    count = results.fsyncs.get("dex-sqlite")
    if isinstance(count, FsyncCount):
        commits = count.per_turn("commit")
        found.append(("at most 6 fsync'd commits per tool turn", f"{commits:.2f}", commits <= 6))
    if results.floor is not None and results.noop_step is not None:
        ratio = results.noop_step / results.floor
        found.append(("no-op Step at most 1.5x one fsync'd commit", f"{ratio:.2f}x", ratio <= 1.5))
    by_processes = {run.processes: run for run in results.throughput}
    if 1 in by_processes:
        one = by_processes[1]
        cpu = one.cpu_per_turn
        found.append(("worker CPU at most 3 ms per tool turn", f"{_ms(cpu)} ms", cpu <= 0.003))
        found.append(
            (
                f"{results.sessions}x{results.session_turns} at least 300 turns/s, one worker process",
                f"{one.turns_per_second:.1f} turns/s",
                one.turns_per_second >= 300,
            )
        )
        if 2 in by_processes:
            two = by_processes[2]
            # Paired round by round when there are rounds: the machine drifts between them.
            ratios = two_over_one(results)
            scale = (
                statistics.median(ratios) if ratios else two.turns_per_second / one.turns_per_second
            )
            # What the CPUs allow two workers beside the client, over one worker's rate.
            ceiling = cpu_ceiling(
                len(os.sched_getaffinity(0)), two.cpu_per_turn, two.client_cpu_per_turn
            )
            found.append(
                (
                    "two worker processes at least 1.5x one",
                    f"{scale:.2f}x (the CPUs allow {ceiling / one.turns_per_second:.2f}x)",
                    scale >= 1.5,
                )
            )
        if one.rpc_wait_seconds and one.worker_write_seconds:
            wait, commit = max(one.rpc_wait_seconds), max(one.worker_write_seconds)
            found.append(
                (
                    "an RPC waits behind a worker for at most one commit",
                    f"waited {_ms(wait)} ms, longest commit {_ms(commit)} ms",
                    # A waiting writer tries the lock every millisecond at most (writer_turnstile).
                    wait <= commit + HAND_OVER,
                )
            )
    if results.waiting is not None:
        run = results.waiting
        # Measured to the nanosecond: "no CPU" is no more than the idle worker's, with 0.1%
        # of one CPU allowed for the noise of its own polls.
        extra = run.waiting_cpu_seconds - run.baseline_cpu_seconds
        growth = run.rss_growth_bytes / 2**20
        found.append(
            (
                f"{run.sessions:,} waiting sessions cost no worker CPU",
                f"{extra * 1000:+.1f} ms over {run.idle_seconds:g} s",
                extra <= run.idle_seconds * IDLE_NOISE,
            )
        )
        found.append(
            (
                f"{run.sessions:,} waiting sessions: under 10 MB of worker memory",
                f"{growth:.1f} MiB",
                run.rss_growth_bytes < 10 * 10**6,
            )
        )
    return found


def print_report(out: TextIO, results: Results, json_bytes: int) -> None:
    """Print every table, then the goals."""
    for line in results.machine:
        print(line, file=out)
    if results.load_end:
        print(f"load average at end: {results.load_end}", file=out)
    print(file=out)
    print_latency(out, results)
    if results.fsyncs:
        print_fsyncs(out, results)
    print_storage(out, results, json_bytes)
    print_engine(out, results)
    print_throughput(out, results)
    print_rpc_waits(out, results)
    print_waiting(out, results)
    print("goals (from the issue), for dex-agents on SQLite:", file=out)
    rows = [
        [goal, figure, "-" if met is None else "met" if met else "NOT MET"]
        for goal, figure, met in goals(results, json_bytes)
    ]
    _table(out, ["goal", "figure", ""], rows)
