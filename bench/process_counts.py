"""What each process of the throughput run does per turn, counted: one worker process against two.

    uv run --frozen python bench/process_counts.py [--sessions N] [--turns N] [--processes 1,2]

``throughput.py``'s workload (a client process, ``--sessions`` sessions at
once, ``--turns`` counted turns each after one untimed turn) beside one and then
two worker processes, each a child of this script that runs
``dex_agents.local.run_workers`` with counting wrappers installed. Over the
counted turns every process counts, per turn:

- its SQL statements (SQLite's trace callback, on every connection it opens),
  by kind; ``BEGIN IMMEDIATE`` counts the tries that found the lock taken too;
- write transactions, the write lock's hold and wait (``transaction_timing.py``),
  fsyncs, and ``try_run_batch`` calls that found the lock or the turnstile taken;
- the turnstile's tries (``writer_turnstile.retried``'s attempts);
- claim rounds (full ones, those that found nothing, the Steps they claimed and
  ran in their commit) and rounds at capacity (a read);
- transactions that began after another connection committed
  (``KnownRows.begin`` with a new ``PRAGMA data_version``): SQLite dropped the
  connection's page cache, and the store what it kept of the runs changed;
- stored values decoded (``decoded_values.from_stored``, by type): a message
  decoded in a worker is one its process had not decoded before.

Counts do not move with the machine's load as times do: they say what a
second worker process adds. The times beside them (turns/s, lock held) are
the run's only. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import workload
from client_statements import statement_kind
from throughput import all_sessions_turns, holds_open, open_sessions, process_cpu_seconds
from transaction_timing import record_write_transactions

START, STOP = signal.SIGUSR1, signal.SIGUSR2


def install_counting(out: Path) -> Callable[[], None]:
    """Wrap this process's store, worker and cache functions to count (see the module's
    docstring); counting runs between ``start`` and ``stop``, and ``stop`` writes the counts
    to ``out`` as JSON. Returns ``start``; ``STOP`` (or calling ``stop``) ends it."""
    from dex_agents.adapters.local import claims, decoded_values, known_rows, writer_turnstile
    from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
    from dex_agents.adapters.local.wal_sync import WalSync
    from dex_agents.ports.flow_store import StoreWouldWaitError

    counts: Counter[str] = Counter()
    timings = record_write_transactions()
    on = False
    connect = sqlite3.connect

    def counted_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)

        def trace(sql: str) -> None:
            if on:
                counts["statements"] += 1
                counts[f"statement: {statement_kind(sql)}"] += 1

        connection.set_trace_callback(trace)
        return connection

    sqlite3.connect = counted_connect  # type: ignore[assignment]

    def wrapped(owner: Any, name: str, count: Callable[..., Any]) -> None:
        real = getattr(owner, name)
        setattr(owner, name, lambda *args, **kwargs: count(real, *args, **kwargs))

    def claim_round(real: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        round_ = real(*args, **kwargs)
        if on:
            counts["claim rounds"] += 1
            counts["claim rounds: Steps claimed to start"] += len(round_.claims)
            counts["claim rounds: Steps run in the round's commit"] += len(round_.ran)
            counts["claim rounds that found nothing"] += not round_.claims and not round_.ran
        return round_

    def capacity_round(real: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        counts["rounds at capacity (a read)"] += on
        return real(*args, **kwargs)

    def from_stored(real: Callable[..., Any], text: str, cls: Any, store: object = None) -> Any:
        counts[f"decoded: {getattr(cls, '__name__', cls)}"] += on
        return real(text, cls, store)

    def retried(real: Callable[..., Any], attempt: Callable[[], bool], deadline: float) -> Any:
        def counted() -> bool:
            counts["turnstile tries"] += on
            return attempt()

        return real(counted, deadline)

    wrapped(claims, "claim_round", claim_round)
    wrapped(claims, "capacity_round", capacity_round)
    wrapped(decoded_values, "from_stored", from_stored)
    wrapped(writer_turnstile, "retried", retried)
    begin, sync, try_batch = known_rows.KnownRows.begin, WalSync.sync, SqliteFlowStore.try_run_batch

    def counted_begin(rows: Any, version: int, changed_since: Any) -> None:
        if on and version != rows._version:
            counts["transactions after another connection's commit"] += 1
        begin(rows, version, changed_since)

    def counted_sync(wal: WalSync) -> None:
        counts["fsyncs"] += on
        sync(wal)

    def counted_try(store: SqliteFlowStore, works: Any, **kwargs: Any) -> Any:
        try:
            return try_batch(store, works, **kwargs)
        except StoreWouldWaitError:
            counts["write tries that found the lock taken"] += on
            raise

    known_rows.KnownRows.begin = counted_begin  # type: ignore[method-assign]
    WalSync.sync = counted_sync  # type: ignore[method-assign,assignment]
    SqliteFlowStore.try_run_batch = counted_try  # type: ignore[method-assign]
    cpu = 0.0

    def start(*_: object) -> None:
        nonlocal on, cpu
        timings.clear()
        cpu, on = time.process_time(), True

    def stop(*_: object) -> None:
        nonlocal on
        on = False
        counts["write transactions"] = len(timings)
        counts["write lock held, ms"] = round(sum(held for _, held in timings) * 1e3, 3)
        counts["write lock waited for, ms"] = round(sum(w for w, _ in timings) * 1e3, 3)
        counts["CPU, ms"] = round((time.process_time() - cpu) * 1e3, 3)
        out.write_text(json.dumps(counts))

    signal.signal(START, start)
    signal.signal(STOP, stop)
    return start


def child(path: str, out: str) -> None:
    """A counting worker process: ``run_workers`` until SIGTERM."""
    install_counting(Path(out))
    from dex_agents.local import run_workers

    run_workers(path, [workload.flow])


async def _until(done: Callable[[], bool]) -> None:
    """Return once ``done()`` holds, looking every 50 ms: what it waits for is another process's."""
    while True:
        if done():
            return
        await asyncio.sleep(0.05)


async def counted_run(directory: Path, processes: int, sessions: int, turns: int) -> dict[str, Any]:
    """One run beside ``processes`` counting worker processes; the counts of each process."""
    from dex_agents.local import LocalRuntime

    path = (directory / f"counts-{processes}.sqlite3").resolve()
    outs = [path.with_name(f"{path.name}-worker-{n}.json") for n in range(processes)]
    client_out = path.with_name(f"{path.name}-client.json")
    start_client = install_counting(client_out)
    workers: list[subprocess.Popen[bytes]] = []
    async with LocalRuntime(path, [workload.flow], workers=0) as runtime:
        try:
            for out in outs:
                command = [sys.executable, __file__, "--child", str(path), str(out)]
                # Started from async code on purpose: Popen returns at once.
                workers.append(subprocess.Popen(command))  # noqa: ASYNC220
            await _until(lambda: all(holds_open(worker.pid, path) for worker in workers))
            client = runtime.sessions(workload.flow)
            ids = await open_sessions(client, "counted", sessions)
            await all_sessions_turns(client, ids, 1, 1)
            for worker in workers:
                os.kill(worker.pid, START)
            start_client()
            cpu = sum(process_cpu_seconds(worker.pid) for worker in workers)
            began = time.perf_counter()
            await all_sessions_turns(client, ids, 2, turns + 1)
            seconds = time.perf_counter() - began
            cpu = sum(process_cpu_seconds(worker.pid) for worker in workers) - cpu
            os.kill(os.getpid(), STOP)
            for worker in workers:
                os.kill(worker.pid, STOP)
            await _until(lambda: all(out.exists() for out in outs))
        finally:
            for worker in workers:
                worker.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.wait(timeout=30)
    return {
        "turns/s": sessions * turns / seconds,
        "worker CPU, ms": cpu * 1e3,
        "workers": [json.loads(out.read_text()) for out in outs],
        "client": json.loads(client_out.read_text()),
    }


def main(argv: Sequence[str]) -> int:
    """Run the counted runs and print one table of counts per turn."""
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2])
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50, help="sessions at once (50)")
    parser.add_argument("--turns", type=int, default=10, help="counted turns per session (10)")
    parser.add_argument("--processes", default="1,2", help="worker processes, each run (1,2)")
    args = parser.parse_args(argv)
    counts = [int(each) for each in args.processes.split(",")]
    if args.sessions < 1 or args.turns < 1 or min(counts) < 1:
        parser.error("--sessions, --turns and --processes must be at least 1")
    turns = args.sessions * args.turns
    columns: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as directory:
        for processes in counts:
            run = asyncio.run(counted_run(Path(directory), processes, args.sessions, args.turns))
            print(
                f"{processes} worker process(es): {run['turns/s']:.1f} turns/s, "
                f"worker CPU {run['worker CPU, ms'] / turns:.2f} ms a turn (this run's load)"
            )
            summed: Counter[str] = Counter()
            for each in run["workers"]:
                summed.update(each)
            columns += [
                (f"{processes} w: workers", summed),
                (f"{processes} w: client", run["client"]),
            ]
    names = sorted({name for _, column in columns for name in column})
    print(f"\nper turn, {args.sessions} sessions x {args.turns} turns:")
    print("| what | " + " | ".join(title for title, _ in columns) + " |")
    print("| --- |" + " ---: |" * len(columns))
    for name in names:
        cells = " | ".join(f"{column.get(name, 0) / turns:.3f}" for _, column in columns)
        print(f"| {name} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
