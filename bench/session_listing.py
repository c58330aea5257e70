"""What listing every session of a file costs: the console's first inbox and ``dex-agents sessions``.

    uv run --frozen python bench/session_listing.py [--sessions N] [--turns N] [--rounds N]

It fills a SQLite file with ``--sessions`` (100) demo sessions of ``--turns``
(50) turns each (a lookup turn, four messages; every tenth session then asks
for a refund and waits for its approval), then, ``--rounds`` (5) times, in this
process and one after the other:

| row | what it is |
| --- | --- |
| first inbox | a new ``SessionCatalog`` on a new reader (``LocalRuntime`` with no worker) builds its inbox: what the console's first page load after ``dex-agents serve`` starts waits for, and what it reads again when it cannot tell which sessions changed |
| one row | ``inbox_row`` of one session after that, the median over 20 sessions: what the inbox reads again for each session that changed, and the session page reads with each snapshot |
| ``dex-agents sessions`` | ``run_sessions`` on the file, its table printed to a discarded stream: the command without Python's start and imports |

It prints each row's median wall-clock and CPU time, and per session. Run it
in two checkouts (``PYTHONPATH``) to compare two commits; the file is made
anew in each run, so both read the same kind of file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from dex_agents.cli.database import demo_flow
from dex_agents.cli.listing import run_sessions
from dex_agents.console.catalog import ConsoleFlow, SessionCatalog
from dex_agents.local import LocalRuntime

APPROVAL_EVERY = 10


async def populate(path: Path, sessions: int, turns: int) -> float:
    """``sessions`` demo sessions of ``turns`` turns in ``path``; return the seconds it took."""
    flow = demo_flow()
    started = time.perf_counter()
    async with LocalRuntime(path, [flow], workers=1, create=True) as runtime:
        client = runtime.sessions(flow)
        limit = asyncio.Semaphore(20)  # the one worker has work queued, and no start waits long

        async def one(number: int) -> None:
            async with limit:
                session_id = f"s-{number:04d}"
                await client.start_session(session_id, f"where is order {number}")
                await client.wait_for_user(session_id)
                for turn in range(1, turns):
                    await client.send_user_message(session_id, f"where is order {turn}")
                    await client.wait_for_user(session_id)
                if number % APPROVAL_EVERY == 0:
                    await client.send_user_message(session_id, f"refund order {number} $5")
                    await client.wait_for_user(session_id)

        await asyncio.gather(*(one(number) for number in range(sessions)))
    return time.perf_counter() - started


async def timed(work: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """The wall-clock and CPU seconds of ``work``."""
    began, cpu = time.perf_counter(), time.process_time()
    await work()
    return time.perf_counter() - began, time.process_time() - cpu


async def listing_round(path: Path, rows: int) -> dict[str, tuple[float, float]]:
    """One round of each row's measurement, on a reader of its own."""
    flow = demo_flow()
    async with LocalRuntime(path, [flow], workers=0, create=False) as runtime:
        catalog = SessionCatalog(runtime, [ConsoleFlow(flow=flow, runtime=runtime, writable=False)])
        first = await timed(catalog.inbox)
        infos = list(await catalog.list_sessions())[:rows]
        one_row = [await timed(functools.partial(catalog.inbox_row, info)) for info in infos]
    with contextlib.redirect_stdout(io.StringIO()):
        listed = await timed(lambda: run_sessions(path))
    return {
        "first inbox": first,
        "one row": (
            statistics.median(wall for wall, _ in one_row),
            statistics.median(cpu for _, cpu in one_row),
        ),
        "dex-agents sessions": listed,
    }


async def main(argv: Sequence[str] | None = None) -> None:
    """Fill the file, measure, and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100, help="sessions in the file (100)")
    parser.add_argument("--turns", type=int, default=50, help="turns of each session (50)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (5)")
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.turns < 1 or args.rounds < 1:
        parser.error("--sessions, --turns and --rounds must be at least 1")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sessions.sqlite3"
        filled = await populate(path, args.sessions, args.turns)
        print(
            f"{args.sessions} sessions of {args.turns} turns, filled in {filled:.1f} s "
            f"({path.stat().st_size / 2**20:.1f} MiB)"
        )
        rounds = [await listing_round(path, min(20, args.sessions)) for _ in range(args.rounds)]
    print()
    print("| median of rounds | ms | CPU ms | ms per session |")
    print("| --- | ---: | ---: | ---: |")
    for name in rounds[0]:
        wall = statistics.median(found[name][0] for found in rounds)
        cpu = statistics.median(found[name][1] for found in rounds)
        per = wall / (1 if name == "one row" else args.sessions)
        print(f"| {name} | {wall * 1000:.2f} | {cpu * 1000:.2f} | {per * 1000:.3f} |")


if __name__ == "__main__":
    asyncio.run(main())
