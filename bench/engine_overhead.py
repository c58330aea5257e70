"""What the embedded engine costs: per-Step overhead against an fsync'd commit, and idle Flows.

Run it from the repository root:

    uv run --frozen python bench/engine_overhead.py [--steps N] [--idle-flows N]

It measures, on temporary files in one directory (so on one disk):

1. the floor: the mean time of one fsync'd SQLite commit (WAL, ``synchronous=FULL``,
   the store's page size) that inserts one row of about the size a Step's commit writes;
2. the per-Step overhead of the embedded engine: a Flow whose one Step does
   nothing and goes to itself ``--steps`` times, with a worker in this process,
   end to end, divided by the Steps it ran; and how many store transactions
   (``FlowStore.run`` calls, and those that wrote) one Step costs;
3. ``--idle-flows`` Flows each waiting on a Channel: how much this process's RSS
   grows, and how much CPU time it uses while it idles with a worker running.

It asserts nothing; it prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.sqlite_versions import NEW_FILE_PAGE_SIZE
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.engine import Rpc, Step, StepDecision, complete, go_to
from dex_agents.ports.flow_rows import ExecutionStatus, FlowRow, FlowStatus
from dex_agents.ports.flow_store import (
    BatchOutcome,
    FlowStore,
    InlineFlowStore,
    StoreTransaction,
    StoreWouldWaitError,
    run_each,
)
from dex_agents.ports.persistence import ChannelDef, StreamDef
from dex_agents.ports.step_contexts import StepContext, WaitContext
from dex_agents.ports.step_waits import ChannelCondition, Wait

R = TypeVar("R")

INBOX: ChannelDef[str] = ChannelDef("Inbox", str)

# The StoreTransaction primitives that write; a transaction that calls none commits no data.
WRITE_PRIMITIVES = frozenset(
    {
        "insert_flow",
        "update_flow",
        "put_value",
        "delete_value",
        "write_values",
        "append_message",
        "consume_messages",
        "delete_message",
        "insert_execution",
        "update_execution",
        "next_step_number",
        "acquire_lock",
        "release_locks",
        "append_event",
        "trim_events",
    }
)


# ---------------------------------------------------------------------------
# Flows


class Spin(Step[int]):
    """Does nothing and goes to itself ``input`` more times, then completes the Flow."""

    input_type = int

    async def execute(self, context: StepContext, input: int) -> StepDecision:
        return go_to(Spin, input - 1) if input > 0 else complete(None)


class Idle(Step[None]):
    """Waits for one Inbox message, which never comes."""

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        return Wait.until(ChannelCondition(INBOX))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        return complete(None)


class BenchFlow:
    """A one-Step Flow type for the benchmark."""

    def __init__(self, flow_type: str, start: Step[Any]) -> None:
        self._flow_type = flow_type
        self._start = start

    @property
    def flow_type(self) -> str:
        return self._flow_type

    @property
    def start_step(self) -> Step[Any]:
        return self._start

    @property
    def steps(self) -> Sequence[Step[Any]]:
        return (self._start,)

    @property
    def schema(self) -> Sequence[Any]:
        return (INBOX,)

    @property
    def stream(self) -> StreamDef[Any] | None:
        return None

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        return {}


SPIN_FLOW = BenchFlow("BenchSpin", Spin())
IDLE_FLOW = BenchFlow("BenchIdle", Idle())


# ---------------------------------------------------------------------------
# Instrumentation


class _WriteSpy:
    """Forwards to a store transaction and notes whether a write primitive was called."""

    def __init__(self, tx: StoreTransaction) -> None:
        self._tx = tx
        self.wrote = False

    def __getattr__(self, name: str) -> Any:
        if name in WRITE_PRIMITIVES:
            self.wrote = True
        return getattr(self._tx, name)


class _Spied(Generic[R]):
    """A store work that runs against a ``_WriteSpy`` of its transaction."""

    def __init__(self, work: Callable[[StoreTransaction], R]) -> None:
        self.work = work
        self.spy: _WriteSpy | None = None

    def __call__(self, tx: StoreTransaction) -> R:
        self.spy = _WriteSpy(tx)
        return self.work(cast(StoreTransaction, self.spy))


class CountingStore:
    """A ``FlowStore`` that counts the transactions it runs, by the work that ran them."""

    def __init__(self, inner: FlowStore) -> None:
        self.inner = inner
        self.transactions: Counter[str] = Counter()
        self.writes = 0
        self.soft_writes = 0
        self.counter_reads = 0

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        return self._count(work, lambda spied: self.inner.run(spied, durable=durable), durable)

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        # One by one, so each work is counted by its name (the engine batches only what
        # queues up while another commit runs; the no-op loop runs one Step at a time).
        return run_each(lambda work: self.run(work, durable=durable), works)

    def read(self, work: Callable[[StoreTransaction], R]) -> R:
        return self._count(work, self.inner.read, True)

    # The engine runs a transaction that can begin at once on its loop's thread, so the
    # count must not take that away from the stores that can.
    def try_run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        inner = self._inline()
        spies = [_Spied(work) for work in works]
        outcomes = inner.try_run_batch(spies, durable=durable)
        for spied in spies:
            self._record(spied, durable)
        return outcomes

    def try_read(self, work: Callable[[StoreTransaction], R]) -> R:
        return self._count(work, self._inline().try_read, True)

    def _inline(self) -> InlineFlowStore:
        if not isinstance(self.inner, InlineFlowStore):
            raise StoreWouldWaitError("the counted store cannot try without waiting")
        return self.inner

    def _count(
        self,
        work: Callable[[StoreTransaction], R],
        runner: Callable[[Callable[[StoreTransaction], R]], R],
        durable: bool,
    ) -> R:
        spied = _Spied(work)
        result = runner(spied)
        self._record(spied, durable)
        return result

    def _record(self, spied: _Spied[Any], durable: bool) -> None:
        name = _work_name(spied.work)
        if not name.startswith(_UNCOUNTED):
            self.transactions[name] += 1
            if spied.spy is not None and spied.spy.wrote:
                # A write with durable=False is committed without an fsync.
                if durable:
                    self.writes += 1
                else:
                    self.soft_writes += 1

    def change_counter(self) -> int:
        self.counter_reads += 1
        return self.inner.change_counter()

    def close(self) -> None:
        self.inner.close()

    def reset(self) -> None:
        self.transactions.clear()
        self.writes = 0
        self.soft_writes = 0
        self.counter_reads = 0


_UNCOUNTED = "_flow_row"  # the benchmark's own polling is not the engine's cost


def _work_name(work: Callable[..., Any]) -> str:
    func = getattr(work, "func", work)  # functools.partial
    name = str(getattr(func, "__qualname__", repr(func)))
    return name.replace(".<locals>.", ".")


def rss_bytes(pid: int | str = "self") -> int:
    """The resident set size of process ``pid`` (this one by default), from /proc/<pid>/status."""
    status = Path(f"/proc/{pid}/status")
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS in {status}")


def cpu_seconds() -> float:
    """User plus system CPU time of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------
# Measurements


def measure_floor(directory: Path, commits: int, row_bytes: int) -> float:
    """The mean seconds of one fsync'd WAL commit inserting one ``row_bytes`` row, in a file
    of the page size the store gives its files (``NEW_FILE_PAGE_SIZE``), so that the floor
    and the Steps it is set against write pages of one size."""
    connection = sqlite3.connect(directory / "floor.sqlite3", isolation_level=None)
    try:
        connection.execute(f"PRAGMA page_size = {NEW_FILE_PAGE_SIZE}")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(
            "CREATE TABLE rows (id INTEGER PRIMARY KEY, flow_id TEXT NOT NULL, value TEXT NOT NULL)"
        )
        payload = "x" * row_bytes
        for _ in range(min(20, commits)):  # warm up the file and the page cache
            connection.execute("INSERT INTO rows (flow_id, value) VALUES ('warm', ?)", (payload,))
        started = time.perf_counter()
        for n in range(commits):
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                "INSERT INTO rows (flow_id, value) VALUES (?, ?)", (f"flow-{n}", payload)
            )
            connection.execute("COMMIT")
        return (time.perf_counter() - started) / commits
    finally:
        connection.close()


@dataclass
class LoopResult:
    """The Step loop's outcome."""

    seconds_per_step: float
    transactions_per_step: float
    writes_per_step: float
    counter_reads_per_step: float
    breakdown: dict[str, float]


async def _flow_row(engine: LocalEngine, flow_id: str) -> FlowRow | None:
    return await engine.read(lambda tx: tx.get_flow(flow_id))


STATUS_CHECK_INTERVAL = 0.02
"""How often the loop checks whether its Flow completed, in seconds."""


async def _spin(engine: LocalEngine, client: LocalFlowClient, flow_id: str, steps: int) -> float:
    """Run the Spin Flow ``steps`` times round; return the seconds from its start to its end.

    The time is the store's own: from the Flow's ``created_at`` (the start's commit) to its
    ``closed_at`` (the last Step's commit). The Flow's status is checked every
    ``STATUS_CHECK_INTERVAL``, not after each commit: a read per Step on the same event loop
    was a quarter of the time of a no-op Step, and no application makes it.
    """
    await client.start_flow(SPIN_FLOW, flow_id, steps)
    while True:
        row = await _flow_row(engine, flow_id)
        if row is not None and row.status is FlowStatus.COMPLETED:
            assert row.closed_at is not None  # a completed Flow has closed
            return (row.closed_at - row.created_at).total_seconds()
        await asyncio.sleep(STATUS_CHECK_INTERVAL)


async def _run_loop(
    store: FlowStore, flow_id: str, steps: int, warmed_up: Callable[[], None] = lambda: None
) -> float:
    """A worker and the Spin Flow on ``store``: a warm-up, ``warmed_up()``, then ``_spin``."""
    engine = LocalEngine(store, [SPIN_FLOW, IDLE_FLOW])
    client = LocalFlowClient(engine)
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())
    try:
        await _spin(engine, client, f"{flow_id}-warm-up", min(20, steps))
        warmed_up()
        return await _spin(engine, client, flow_id, steps)
    finally:
        await worker.stop()
        await task
        engine.close()


async def measure_loop(store: FlowStore, steps: int) -> LoopResult:
    """Run the Spin Flow ``steps`` times round with a worker in this process, twice: timed on
    ``store`` itself, then counted through a ``CountingStore`` (whose spying costs time)."""
    executed = steps + 1
    counting = CountingStore(store)
    try:
        seconds = await _run_loop(store, "loop", steps)
        await _run_loop(counting, "counted", steps, counting.reset)
    finally:
        counting.close()
    transactions = sum(counting.transactions.values())
    return LoopResult(
        seconds_per_step=seconds / executed,
        transactions_per_step=transactions / executed,
        writes_per_step=counting.writes / executed,
        counter_reads_per_step=counting.counter_reads / executed,
        breakdown={name: count / executed for name, count in counting.transactions.most_common()},
    )


@dataclass
class IdleResult:
    """The idle Flows' outcome."""

    flows: int
    seconds_to_wait: float
    rss_growth_bytes: int
    idle_seconds: float
    idle_cpu_seconds: float
    baseline_cpu_seconds: float


async def measure_idle(store: FlowStore, flows: int, idle_seconds: float) -> IdleResult:
    """Start ``flows`` Flows that wait on a Channel, then idle with a worker running."""
    engine = LocalEngine(store, [SPIN_FLOW, IDLE_FLOW])
    client = LocalFlowClient(engine)
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())

    def waiting(tx: StoreTransaction) -> int:
        return sum(
            1
            for row in tx.list_flows()
            for execution in tx.flow_executions(row.flow_id, [ExecutionStatus.WAITING])
        )

    try:
        # The baseline: the same worker idling with no Flow at all.
        baseline = cpu_seconds()
        await asyncio.sleep(idle_seconds)
        baseline = cpu_seconds() - baseline
        gc.collect()
        rss_before = rss_bytes()
        started = time.perf_counter()
        for n in range(flows):
            await client.start_flow(IDLE_FLOW, f"idle-{n}", None)
        while await engine.run(waiting) < flows:
            await engine.wait_for_change(await engine.change_counter(), timedelta(seconds=1))
        seconds_to_wait = time.perf_counter() - started
        gc.collect()
        rss_after = rss_bytes()
        cpu = cpu_seconds()
        await asyncio.sleep(idle_seconds)
        cpu = cpu_seconds() - cpu
        return IdleResult(
            flows, seconds_to_wait, rss_after - rss_before, idle_seconds, cpu, baseline
        )
    finally:
        await worker.stop()
        await task
        engine.close()
        store.close()


# ---------------------------------------------------------------------------
# Report


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


async def main(argv: Sequence[str]) -> int:
    """Run the benchmark and print its results."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="Step loop length (300)")
    parser.add_argument("--idle-flows", type=int, default=500, help="waiting Flows (500)")
    parser.add_argument("--idle-seconds", type=float, default=3.0, help="idle window (3 s)")
    parser.add_argument("--floor-commits", type=int, default=300, help="floor commits (300)")
    parser.add_argument("--row-bytes", type=int, default=1024, help="floor row size (1024)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.idle_flows < 0 or args.floor_commits < 1:
        parser.error("--steps and --floor-commits must be at least 1, --idle-flows at least 0")

    with tempfile.TemporaryDirectory(prefix="dex-agents-bench-") as name:
        directory = Path(name)
        floor = measure_floor(directory, args.floor_commits, args.row_bytes)
        sqlite_loop = await measure_loop(SqliteFlowStore(directory / "loop.sqlite3"), args.steps)
        memory_loop = await measure_loop(MemoryFlowStore(), args.steps)
        idle = await measure_idle(
            SqliteFlowStore(directory / "idle.sqlite3"), args.idle_flows, args.idle_seconds
        )

    rows = [
        ("files in", f"{directory.parent} (one disk)"),
        (f"floor: one fsync'd commit of a {args.row_bytes} B row", _ms(floor)),
        (f"engine, SQLite: per Step ({args.steps + 1} Steps)", _ms(sqlite_loop.seconds_per_step)),
        ("engine, SQLite: per Step / floor", f"{sqlite_loop.seconds_per_step / floor:.2f}x"),
        ("store transactions per Step", f"{sqlite_loop.transactions_per_step:.2f}"),
        ("  of which write (fsync'd commits)", f"{sqlite_loop.writes_per_step:.2f}"),
        ("change-counter reads per Step", f"{sqlite_loop.counter_reads_per_step:.2f}"),
        (
            "engine, SQLite: per Step / (floor x writes)",
            f"{sqlite_loop.seconds_per_step / (floor * max(sqlite_loop.writes_per_step, 1e-9)):.2f}x",
        ),
        ("engine, in memory: per Step", _ms(memory_loop.seconds_per_step)),
        ("idle Flows waiting on a Channel", str(idle.flows)),
        ("  time to start them all and reach their waits", f"{idle.seconds_to_wait:.2f} s"),
        ("  RSS growth", f"{idle.rss_growth_bytes / 1024:.0f} KiB"),
        (
            "  RSS growth per Flow",
            f"{idle.rss_growth_bytes / max(idle.flows, 1) / 1024:.2f} KiB",
        ),
        (
            f"  CPU over {idle.idle_seconds:g} s idle, {idle.flows} waiting",
            f"{idle.idle_cpu_seconds * 1000:.0f} ms ({idle.idle_cpu_seconds / idle.idle_seconds:.2%})",
        ),
        (
            f"  CPU over {idle.idle_seconds:g} s idle, no Flow",
            f"{idle.baseline_cpu_seconds * 1000:.0f} ms "
            f"({idle.baseline_cpu_seconds / idle.idle_seconds:.2%})",
        ),
    ]
    width = max(len(label) for label, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 20}")
    for label, value in rows:
        print(f"{label.ljust(width)}  {value}")
    print()
    print("store transactions per Step, by the work that ran them:")
    for name, count in sqlite_loop.breakdown.items():
        print(f"  {count:5.2f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
