"""How long a session waits after its worker process is killed with SIGKILL and started again.

    uv run --frozen python bench/crash_recovery.py [--rounds N] [--lease SECONDS]
        [--signal kill|term]

This process is the client (``LocalRuntime`` with no worker). Each round starts
a worker process (``run_workers``, with a ``--lease`` of 10 s, the default),
sends a session a message whose turn calls a read tool, and kills the worker
with SIGKILL while the tool runs (the tool's first call of the round waits
forever; its file says when it began); ``--signal term`` stops it with SIGTERM
instead, as a deploy or ``systemctl restart`` does (``run_workers`` then stops
its worker and exits). Then it starts a worker process again
and waits for the turn to end: the read tool runs again as a new attempt, and
the model answers. It prints, per round and as medians:

| column | what it is |
| --- | --- |
| restart | from the signal until the new worker process is ready (the old one's exit, Python's start and imports, then the runtime's open) |
| kill to answer | from the signal until ``wait_for_user`` returned the answered turn: what the person in the session waits |

Run it in two checkouts (``PYTHONPATH``) to compare two commits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

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
from dex_agents.local import LocalRuntime, run_workers

STATE_ENV = "CRASH_RECOVERY_STATE"
"""The directory of the round's files, for the worker processes' tool."""


@function_tool(effect=ToolEffect.READ)
async def slow_lookup(order_id: str) -> str:
    """Look an order up; the round's first call never returns (its worker is killed)."""
    began = Path(os.environ[STATE_ENV]) / f"began-{order_id}"
    if not began.exists():
        began.write_text(str(os.getpid()))
        await asyncio.Event().wait()
    return f"order {order_id} shipped"


def _scripted(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if len(results) < len(ScriptedModelClient.user_texts(request)):
        order = str(len(results) + 1)
        return ScriptedModelReply(
            tool_calls=(ScriptedToolCall("slow_lookup", {"order_id": order}),)
        )
    return ScriptedModelReply(text=results[-1].output)


flow = builtin_agent_session_flow(
    AgentDefinition(
        name="recovery",
        instructions="Look orders up.",
        model=ScriptedModelClient(_scripted, max_recorded_requests=0),
        tools=[slow_lookup],
    ),
    flow_type="BenchRecovery",
)


def start_worker(db: Path, state: Path, lease: float) -> subprocess.Popen[bytes]:
    """A worker process serving ``flow`` on ``db``."""
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", str(db), "--lease", str(lease)],
        env={**os.environ, STATE_ENV: str(state)},
        cwd=Path(__file__).parent,
    )


async def until(check: Path, deadline: float) -> None:
    """Wait until ``check`` exists."""
    stop = time.monotonic() + deadline
    while not await asyncio.to_thread(check.exists):
        if time.monotonic() > stop:
            raise TimeoutError(f"{check} did not appear in {deadline} s")
        await asyncio.sleep(0.005)


async def one_round(
    db: Path, state: Path, number: int, lease: float, stop: signal.Signals
) -> tuple[float, float]:
    """Stop the worker with ``stop`` while round ``number``'s tool runs; the seconds until a
    new worker is ready and until the turn answered."""
    worker = start_worker(db, state, lease)
    try:
        async with LocalRuntime(db, [flow], workers=0, create=False) as runtime:
            sessions = runtime.sessions(flow)
            await sessions.send_user_message("recovery", f"where is order {number}")
            await until(state / f"began-{number}", 60)
            killed = time.perf_counter()
            worker.send_signal(stop)
            await asyncio.to_thread(worker.wait)
            worker = start_worker(db, state, lease)
            ready = state / f"ready-{worker.pid}"
            await until(ready, 60)
            restarted = time.perf_counter() - killed
            snapshot = await sessions.wait_for_user("recovery", timeout=timedelta(minutes=5))
            answered = time.perf_counter() - killed
            if snapshot.messages[-1].text != f"order {number} shipped":
                raise RuntimeError(f"round {number} ended with {snapshot.messages[-1].text!r}")
            return restarted, answered
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait()


async def measure(rounds: int, lease: float, stop: signal.Signals) -> list[tuple[float, float]]:
    """Run ``rounds`` rounds on a new file; the first turn (no crash) warms it up."""
    with tempfile.TemporaryDirectory() as folder:
        db, state = Path(folder) / "recovery.sqlite3", Path(folder)
        async with LocalRuntime(db, [flow], workers=0, create=True) as runtime:
            await runtime.sessions(flow).open_session("recovery")
        return [await one_round(db, state, n, lease, stop) for n in range(1, rounds + 1)]


def serve(db: str, lease: float) -> None:
    """The worker process: say it is ready once its runtime opened, then serve until SIGTERM."""
    ready = Path(os.environ[STATE_ENV]) / f"ready-{os.getpid()}"

    async def opened() -> None:
        async with LocalRuntime(db, [flow], workers=0, create=False):
            pass
        ready.write_text("ready")

    asyncio.run(opened())
    run_workers(db, [flow], lease_duration=timedelta(seconds=lease))


def main() -> None:
    """Parse the arguments; run the rounds, or serve as a worker process."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="kills (3)")
    parser.add_argument("--lease", type=float, default=10.0, help="the workers' lease (10 s)")
    parser.add_argument("--signal", choices=("kill", "term"), default="kill", help="(kill)")
    parser.add_argument("--worker", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        serve(args.worker, args.lease)
        return
    if args.rounds < 1 or args.lease <= 0:
        parser.error("--rounds must be at least 1 and --lease positive")
    stop = signal.SIGKILL if args.signal == "kill" else signal.SIGTERM
    results = asyncio.run(measure(args.rounds, args.lease, stop))
    print(f"lease {args.lease:g} s, {args.rounds} rounds, {stop.name}")
    print()
    print("| round | restart s | kill to answer s |")
    print("| --- | ---: | ---: |")
    for number, (restarted, answered) in enumerate(results, 1):
        print(f"| {number} | {restarted:.2f} | {answered:.2f} |")
    restart = statistics.median(r for r, _ in results)
    answer = statistics.median(a for _, a in results)
    print(f"| median | {restart:.2f} | {answer:.2f} |")


if __name__ == "__main__":
    main()
