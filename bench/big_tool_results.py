"""What a tool's big result costs a durable turn: CPU and file bytes by the result's size.

Run it from the repository root:

    uv run --frozen python bench/big_tool_results.py [--sizes A,B,...] [--turns N]

Agents read files, web pages and query results, and a tool's result is
stored in its call record, in its message and later in a message chunk. For
each of ``--sizes`` (100, 20,000 and 200,000 characters) a ``LocalRuntime`` on
a SQLite file of its own serves one session whose scripted model calls a read
tool each turn and then answers; the tool returns that many characters of this
package's own source, as a file read would. After warm-up turns the sessions'
``--turns`` (30) turns take turns, and the benchmark prints each size's median
CPU time of the process per turn, the turns after the first third (a session's
history grows by about twice the result a turn), and the file's bytes per turn
(the database and its WAL, after a checkpoint). It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SESSION = "bench"


def source_text(size: int) -> str:
    """``size`` characters of the package's source, repeated if it is shorter."""
    text = "".join(path.read_text() for path in sorted((ROOT / "dex_agents").rglob("*.py")))
    return (text * (size // len(text) + 1))[:size]


def file_bytes(path: Path) -> int:
    """The bytes of the SQLite file at ``path`` after its WAL is checkpointed into it."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def measure(sizes: Sequence[int], turns: int) -> dict[int, tuple[list[float], float]]:
    """Per size: the CPU seconds of each timed turn, and the file's bytes per turn."""
    from dex_agents import ToolEffect
    from dex_agents.builtin_loop import (
        AgentDefinition,
        ModelRequest,
        ScriptedModelClient,
        ScriptedModelReply,
        ScriptedToolCall,
        builtin_agent_session_flow,
        function_tool,
    )
    from dex_agents.local import LocalRuntime

    def flow_of(size: int) -> Any:
        result = source_text(size)

        @function_tool(effect=ToolEffect.READ)
        def read_file(path: str) -> str:
            """Read a file."""
            return result

        def model(request: ModelRequest) -> ScriptedModelReply:
            if not ScriptedModelClient.tool_results(request):
                return ScriptedModelReply(
                    tool_calls=(ScriptedToolCall("read_file", {"path": "notes.txt"}),)
                )
            return ScriptedModelReply(text="I read it.")

        agent = AgentDefinition(
            name="bench",
            instructions="You read files.",
            model=ScriptedModelClient(model, max_recorded_requests=0),
            tools=[read_file],
        )
        return builtin_agent_session_flow(agent, flow_type=f"BigResults{size}")

    times: dict[int, list[float]] = {size: [] for size in sizes}
    with tempfile.TemporaryDirectory(prefix="dex-big-results-") as directory:
        paths = {size: Path(directory) / f"results-{size}.sqlite3" for size in sizes}
        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            for size in sizes:
                flow = flow_of(size)
                runtime = await stack.enter_async_context(
                    LocalRuntime(paths[size], [flow], create=True)
                )
                clients[size] = runtime.sessions(flow)
                await clients[size].open_session(SESSION)

            async def turn(size: int, number: int) -> float:
                started = time.process_time()
                assert await clients[size].send_user_message(SESSION, f"read it, {number}")
                done = await clients[size].wait_for_user(SESSION)
                spent = time.process_time() - started
                assert done.messages[-1].text == "I read it.", done.messages[-1].text
                return spent

            for number in range(3):
                for size in sizes:
                    await turn(size, number)
            for number in range(turns):
                order = list(sizes) if number % 2 == 0 else list(reversed(sizes))
                for size in order:
                    times[size].append(await turn(size, number))
        per_turn = {size: file_bytes(paths[size]) / (turns + 3) for size in sizes}
    return {size: (times[size], per_turn[size]) for size in sizes}


async def main(argv: Sequence[str]) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="100,20000,200000", help="result sizes in characters (100,20000,200000)"
    )
    parser.add_argument("--turns", type=int, default=30, help="timed turns per size (30)")
    arguments = parser.parse_args(argv)
    sizes = [int(size) for size in arguments.sizes.split(",")]
    if arguments.turns < 3 or not sizes or min(sizes) < 1:
        parser.error("--turns must be at least 3 and every size at least 1")
    results = await measure(sizes, arguments.turns)
    third = arguments.turns // 3
    print(f"{arguments.turns} turns per size, one read tool call and an answer a turn")
    print("| result chars | CPU ms per turn | turns after the first third | file KiB per turn |")
    print("| ---: | ---: | ---: | ---: |")
    for size in sizes:
        times, per_turn = results[size]
        print(
            f"| {size:,} | {statistics.median(times) * 1000:.2f} | "
            f"{statistics.median(times[third:]) * 1000:.2f} | {per_turn / 1024:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
