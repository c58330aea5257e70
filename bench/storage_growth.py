"""How a long session's database file grows, with and without compaction and retention.

```
uv run --frozen python bench/storage_growth.py [--turns N] [--every N] [--stream-kib N]
```

Two sessions of ``turns.py``'s scripted tool turn (``workload.py``), each in an
SQLite file of its own, one turn of each in turn:

- "kept": ``workload.flow`` as it is: no compaction, so every message stays
  (the model input is every message), and the engine's history-retention rule
  (``dex_agents/adapters/local/history_retention.py``) prunes what it can;
- "compacted": the same agent with a ``CompactionPolicy`` of
  ``--window-tokens`` (40,000) context tokens and the default
  ``retained_message_limit`` (1,000), and an ``AgentEvents`` Stream of
  ``--stream-kib`` (1,024) KiB, so the Stream trims within the run.

Every ``--every`` (200) turns it prints each file's pages in use, its largest
tables (SQLite's ``dbstat``) and the conversation's JSON so far
(``workload.conversation_json_bytes``). The compacted file should stop
growing once compaction, message retention, Step history retention and the
Stream's trimming all run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import workload

from dex_agents import CONTEXT_SUMMARY_INSTRUCTIONS, AgentSessionFlow, CompactionPolicy
from dex_agents.builtin_loop import (
    AgentDefinition,
    BuiltinLoopAgentRunner,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    builtin_agent_session_options,
)
from dex_agents.local import LocalRuntime

SESSION_ID = "bench"


def _respond(request: ModelRequest) -> ScriptedModelReply:
    if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
        return ScriptedModelReply(text="The customer keeps asking where order 7 is.")
    return workload.scripted_model(request)


def compacted_flow(window_tokens: int, stream_bytes: int) -> AgentSessionFlow:
    """``workload.flow``'s agent with compaction, on a smaller Stream."""
    agent = AgentDefinition(
        name="bench-compacted",
        instructions=workload.INSTRUCTIONS,
        model=ScriptedModelClient(_respond, max_recorded_requests=0),
        tools=[workload.lookup_order],
        compaction=CompactionPolicy(context_window_tokens=window_tokens),
    )
    options = dataclasses.replace(
        builtin_agent_session_options(agent), event_stream_capacity_bytes=stream_bytes
    )
    return AgentSessionFlow(
        BuiltinLoopAgentRunner(agent), flow_type="BenchCompacted", options=options
    )


def table_sizes(path: Path) -> tuple[int, list[tuple[str, int]]]:
    """Pages in use (bytes) and the largest tables with their indexes, read after a checkpoint."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(connection.execute("PRAGMA page_size").fetchone()[0])
        pages = int(connection.execute("PRAGMA page_count").fetchone()[0])
        free = int(connection.execute("PRAGMA freelist_count").fetchone()[0])
        rows = connection.execute(
            """SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d
            LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY 1 ORDER BY 2 DESC LIMIT 4"""
        ).fetchall()
    return (pages - free) * page, [(str(name), int(size)) for name, size in rows]


async def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2400)
    parser.add_argument("--every", type=int, default=200)
    parser.add_argument("--window-tokens", type=int, default=40_000)
    parser.add_argument("--stream-kib", type=int, default=1024)
    args = parser.parse_args(argv)
    compacted = compacted_flow(args.window_tokens, args.stream_kib * 1024)
    with tempfile.TemporaryDirectory() as directory:
        paths = {"kept": Path(directory) / "kept.sqlite3"}
        paths["compacted"] = Path(directory) / "compacted.sqlite3"
        flows = {"kept": workload.flow, "compacted": compacted}
        runtimes = {name: LocalRuntime(paths[name], [flows[name]]) for name in paths}
        for runtime in runtimes.values():
            await runtime.open()
        try:
            sessions = {name: runtimes[name].sessions(flows[name]) for name in paths}
            for client in sessions.values():
                await client.open_session(SESSION_ID)
                await client.wait_for_user(SESSION_ID)
            started = time.perf_counter()
            print("turns  session    in use KiB  / JSON  largest tables (KiB)", flush=True)
            for turn in range(1, args.turns + 1):
                for name, client in sessions.items():
                    await client.send_user_message(SESSION_ID, workload.user_message(turn))
                    snapshot = await client.wait_for_user(SESSION_ID)
                    expected = workload.answer(workload.order_status(workload.ORDER_ID))
                    if snapshot.messages[-1].text != expected:
                        raise RuntimeError(f"{name} turn {turn} answered {snapshot.messages[-1]}")
                if turn % args.every == 0:
                    json_bytes = workload.conversation_json_bytes(turn)
                    for name, path in paths.items():
                        in_use, tables = table_sizes(path)
                        largest = ", ".join(f"{table} {size // 1024:,}" for table, size in tables)
                        print(
                            f"{turn:5d}  {name:9s}  {in_use // 1024:10,d}  "
                            f"{in_use / json_bytes:5.2f}x  {largest}",
                            flush=True,
                        )
            print(f"{args.turns} turns of each in {time.perf_counter() - started:.0f} s")
        finally:
            for runtime in runtimes.values():
                await runtime.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
