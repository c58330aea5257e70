"""What a client beside a worker process asks of the file per turn: its SQL statements, counted.

    uv run --frozen python bench/client_statements.py [--sessions N] [--turns N] [--top N]

A web server that runs ``LocalRuntime(path, flows, workers=0)`` beside worker
processes sends each message to a worker and follows its session's Stream
until the turn ends. This process is such a client beside one
``turn_worker.py`` process: ``--sessions`` (50) sessions run one untimed turn
each, then ``--turns`` (10) more each, all sessions at once. Over the counted
turns every statement the client's store runs is counted by SQLite's trace
callback on both its connections (its own, and the one that reads only
``PRAGMA data_version``), and the benchmark prints statements per turn, by the
kind of statement (its first words and table), with the client's CPU time per
turn beside them.

Statement counts do not move with the machine's load, so two commits compare
by them run after run; the CPU time does move. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import workload
from throughput import all_sessions_turns, open_sessions, worker_beside

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.local import LocalRuntime


def statement_kind(sql: str) -> str:
    """A statement's first words and the table it names: how the counts are grouped."""
    words = re.sub(r"\s+", " ", sql).strip()
    table = re.search(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", words)
    head = " ".join(words.split(" ")[:2])
    if table is None or head.startswith("PRAGMA") or table.group(1) in head:
        return head
    return f"{head} ... {table.group(1)}"


async def measure(path: Path, sessions: int, turns: int) -> tuple[Counter[str], float]:
    """The client's statements over ``sessions`` x ``turns`` turns, by kind, and its CPU seconds."""
    async with LocalRuntime(path, [workload.flow], workers=0) as runtime:
        # The store's connections are private; what they run is this benchmark's whole point:
        # its own, and the one that reads only PRAGMA data_version (the change counter).
        store = runtime._store
        assert isinstance(store, SqliteFlowStore)
        connections = [store._connection, store._poll]
        async with worker_beside(path):
            client = runtime.sessions(workload.flow)
            ids = await open_sessions(client, "client", sessions)
            await all_sessions_turns(client, ids, 1, 1)
            counted: Counter[str] = Counter()
            for connection in connections:
                assert connection is not None
                connection.set_trace_callback(lambda sql: counted.update((statement_kind(sql),)))
            cpu = time.process_time()
            await all_sessions_turns(client, ids, 2, turns + 1)
            cpu = time.process_time() - cpu
            for connection in connections:
                assert connection is not None
                connection.set_trace_callback(None)
            return counted, cpu


def main(argv: Sequence[str]) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50, help="sessions at once (50)")
    parser.add_argument("--turns", type=int, default=10, help="counted turns per session (10)")
    parser.add_argument("--top", type=int, default=12, help="kinds of statement listed (12)")
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.turns < 1 or args.top < 0:
        parser.error("--sessions and --turns must be at least 1, --top not negative")
    with tempfile.TemporaryDirectory() as directory:
        path = (Path(directory) / "client.sqlite3").resolve()
        counted, cpu = asyncio.run(measure(path, args.sessions, args.turns))
    turns = args.sessions * args.turns
    print(f"{args.sessions} sessions x {args.turns} turns beside one worker process")
    print(f"client statements per turn: {sum(counted.values()) / turns:.1f}")
    print(f"client CPU per turn: {cpu / turns * 1e3:.2f} ms")
    print("| statements per turn | kind |")
    print("| ---: | --- |")
    for kind, count in counted.most_common(args.top):
        print(f"| {count / turns:.2f} | `{kind}` |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
