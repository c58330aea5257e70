"""What one read of ``wait_for_user`` costs on the embedded engine, busy and idle.

    uv run --frozen python bench/wait_reads.py [--turns N,N] [--reads N] [--rounds N]

``wait_for_user`` reads the session until it needs a person. On the embedded
engine each read is ``SNAPSHOT_WHEN_NEEDED`` (the whole snapshot only when the
session needs a person, otherwise its attention part); before 2026-12-06 it was
``get_agent_snapshot`` each time. A client whose worker runs in another process
reads twice a turn (once right after ``send_user_message``, busy; once at the
turn's end, idle), and a wait during a long model call reads again each time the
session changed and the Stream went quiet, busy every time.

For a demo session of each ``--turns`` length (10 and 200 turns: the snapshot's
window holds 40 and 200 messages), in one ``LocalRuntime`` with no worker (as a
client process beside worker processes), it times ``--reads`` (300) reads of
each kind on the session idle, and again busy (a message queued that no worker
takes), ``--rounds`` (5) rounds alternating the kinds, and prints the median
round's CPU time per read and the ratio. The reads come from the rows the
store keeps, as a waiting client's do between the worker's commits.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from dex_agents.app.rpcs import SNAPSHOT_WHEN_NEEDED
from dex_agents.cli.database import demo_flow
from dex_agents.local import LocalRuntime


async def populate(path: Path, session_id: str, turns: int) -> None:
    """A demo session of ``turns`` lookup turns in ``path``."""
    flow = demo_flow()
    async with LocalRuntime(path, [flow], workers=1, create=True) as runtime:
        client = runtime.sessions(flow)
        await client.start_session(session_id, "where is order 1")
        await client.wait_for_user(session_id)
        for turn in range(2, turns + 1):
            await client.send_user_message(session_id, f"where is order {turn}")
            await client.wait_for_user(session_id)


async def cpu_per_call(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    """The process's CPU seconds per ``call()``, over ``calls`` calls after a few untimed."""
    for _ in range(5):
        await call()
    started = time.process_time()
    for _ in range(calls):
        await call()
    return (time.process_time() - started) / calls


async def measure(path: Path, session_id: str, reads: int, rounds: int) -> tuple[float, float, int]:
    """The median CPU seconds of a ``get_agent_snapshot`` read and of the wait's read now,
    and the messages the whole snapshot holds."""
    flow = demo_flow()
    async with LocalRuntime(path, [flow], workers=0, create=False) as runtime:
        sessions = runtime.sessions(flow)
        client = runtime.flow_client

        async def whole() -> Any:
            return await sessions.get_agent_snapshot(session_id)

        async def waits() -> Any:
            return await client.read_view(flow, session_id, SNAPSHOT_WHEN_NEEDED)

        before, now = [], []
        for _ in range(rounds):
            before.append(await cpu_per_call(whole, reads))
            now.append(await cpu_per_call(waits, reads))
        messages = len((await whole()).messages)
    return statistics.median(before), statistics.median(now), messages


async def queue_a_message(path: Path, session_id: str) -> None:
    """Make the session busy: a message queued, with no worker to take it."""
    flow = demo_flow()
    async with LocalRuntime(path, [flow], workers=0, create=False) as runtime:
        if not await runtime.sessions(flow).send_user_message(session_id, "where is order 2"):
            raise RuntimeError("the session refused the message")


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", default="10,200", help="session lengths, comma-separated")
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    print("CPU us per read (median round); before: get_agent_snapshot, now: SNAPSHOT_WHEN_NEEDED")
    print(
        f"{'turns':>5}  {'session':7}  {'messages':>8}  {'before':>7}  {'now':>7}  {'now/before':>10}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for turns in (int(each) for each in args.turns.split(",")):
            path = Path(folder) / f"wait-{turns}.sqlite3"
            await populate(path, "s", turns)
            for situation in ("idle", "busy"):
                if situation == "busy":
                    await queue_a_message(path, "s")
                before, now, messages = await measure(path, "s", args.reads, args.rounds)
                print(
                    f"{turns:>5}  {situation:7}  {messages:>8}  {before * 1e6:>7.1f}  "
                    f"{now * 1e6:>7.1f}  {now / before:>9.2f}x"
                )


if __name__ == "__main__":
    asyncio.run(main())
