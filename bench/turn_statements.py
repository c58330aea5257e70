"""The SQL statements of one in-process turn on SQLite, counted by kind, and where each change
counter read comes from.

    python bench/turn_statements.py [--warm N] [--turns N] [--top N]

``turn_instructions.py``'s turn (one process, one worker, the scripted model):
``--warm`` turns (30) run uncounted, then every statement of ``--turns`` turns
(20) is counted by SQLite's trace callback on both of the store's connections
(its own, and the one that reads only ``PRAGMA data_version``). Statements are
grouped as ``client_statements.py`` groups them; each ``PRAGMA data_version``
is grouped by the connection and the dex-agents functions that made it, since
that read is the most frequent statement of a turn. Counts do not move with
the machine's load, so two checkouts compare by them run after run. It asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The checkout this script is in, before an installed dex-agents: run from another
# checkout, it counts that checkout's code.
sys.path.insert(0, str(HERE.parent))

import workload  # noqa: E402
from client_statements import statement_kind  # noqa: E402

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore  # noqa: E402
from dex_agents.local import LocalRuntime  # noqa: E402

CALLERS = 3
"""How many dex-agents frames name where a ``PRAGMA data_version`` came from."""


def _counter(connection: str, counted: Counter[str]) -> Callable[[str], None]:
    def count(sql: str) -> None:
        kind = statement_kind(sql)
        if kind == "PRAGMA data_version":
            frames = [
                frame for frame in traceback.extract_stack()[:-1] if "dex_agents" in frame.filename
            ][-CALLERS:]
            where = " <- ".join(f"{Path(f.filename).name}:{f.name}" for f in reversed(frames))
            kind = f"{kind} ({connection}) {where}"
        counted[kind] += 1

    return count


async def measure(warm: int, turns: int) -> Counter[str]:
    """The statements of turns ``warm`` to ``warm + turns - 1`` of one session, by kind."""
    counted: Counter[str] = Counter()
    path = Path(tempfile.mkdtemp()) / "turns.sqlite3"
    runtime = LocalRuntime(path, [workload.flow], workers=1)
    await runtime.open()
    try:
        # The store's connections are private; what they run is this benchmark's whole point.
        store = runtime._store
        assert isinstance(store, SqliteFlowStore)
        sessions = runtime.sessions(workload.flow)
        await sessions.open_session("s")
        await sessions.wait_for_user("s")
        for turn in range(warm + turns):
            if turn == warm:
                for name, connection in (("own", store._connection), ("poll", store._poll)):
                    assert connection is not None
                    connection.set_trace_callback(_counter(name, counted))
            await sessions.send_user_message("s", workload.user_message(turn))
            await sessions.wait_for_user("s")
    finally:
        await runtime.close()
    return counted


def main(argv: Sequence[str]) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--warm", type=int, default=30, help="uncounted turns first (30)")
    parser.add_argument("--turns", type=int, default=20, help="counted turns (20)")
    parser.add_argument("--top", type=int, default=40, help="kinds of statement listed (40)")
    args = parser.parse_args(argv)
    counted = asyncio.run(measure(args.warm, args.turns))
    total = sum(counted.values())
    reads = sum(n for kind, n in counted.items() if kind.startswith("PRAGMA data_version"))
    print(f"statements per turn: {total / args.turns:.2f}")
    print(f"PRAGMA data_version per turn: {reads / args.turns:.2f}")
    print("| statements per turn | kind |\n| ---: | --- |")
    for kind, count in counted.most_common(args.top):
        print(f"| {count / args.turns:.2f} | `{kind}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
