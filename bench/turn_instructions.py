"""CPU instructions of one dex-agents turn, counted by valgrind: a figure the machine's load cannot move.

    python bench/turn_instructions.py [--store sqlite|memory] [--warm N] [--turns N]
        [--history N]

This machine's speed moves by up to four times within an hour, so two commits'
turn latencies are comparable only side by side in one run. Instructions are
not: ``valgrind --tool=callgrind`` counts the user-space instructions of a
process, whatever else the machine does. They still move by a few percent
from run to run of one commit (how the event loop and the store's threads
hand work to each other under valgrind), so compare the medians of several
runs. The
script runs ``--warm`` turns (30) in one child and ``--warm`` + ``--turns``
(20) in another, both under callgrind, and prints the difference per turn:
what one turn costs after the session's start and warm-up. With ``--history N``
(SQLite only) the session first runs N turns in a child of its own, not
counted, and each counted child starts from a copy of that file: what a turn
costs N turns into a session, beside what an early one costs, with no drift of
the machine between them. Work in the kernel (fsync, pwrite, locks) is not
counted; ``turns.py`` times that.

Run it in two checkouts to compare two commits; it needs ``valgrind`` on PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The checkout this script is in, before an installed dex-agents: run from another
# checkout, it counts that checkout's code.
sys.path.insert(0, str(HERE.parent))

import workload  # noqa: E402


async def _turns(path: Path | None, first: int, count: int) -> None:
    """Run turns ``first`` to ``first + count - 1`` of session ``s`` (opened at turn 0)."""
    from dex_agents.local import LocalRuntime

    runtime = LocalRuntime(path, [workload.flow], workers=1)
    await runtime.open()
    try:
        sessions = runtime.sessions(workload.flow)
        if first == 0:
            await sessions.open_session("s")
        await sessions.wait_for_user("s")
        for turn in range(first, first + count):
            await sessions.send_user_message("s", workload.user_message(turn))
            snapshot = await sessions.wait_for_user("s")
            answer = snapshot.messages[-1].text or ""
            if not answer.startswith("I looked it up"):
                raise RuntimeError(f"turn {turn} answered {answer!r}")
    finally:
        await runtime.close()


async def _counted(store: str, count: int, history: Path | None, first: int) -> None:
    """A counted child: ``count`` turns in a new file (or memory), or in a copy of ``history``,
    whose session ran ``first`` turns."""
    folder = Path(tempfile.mkdtemp())
    try:
        path = None if store == "memory" else folder / "turns.sqlite3"
        if history is not None and path is not None:
            shutil.copyfile(history, path)
            wal = history.with_name(history.name + "-wal")  # a close checkpoints it away
            if wal.exists():
                shutil.copyfile(wal, path.with_name(path.name + "-wal"))
        await _turns(path, first, count)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _history(turns: int) -> Path:
    """A closed SQLite file whose session ``s`` ran ``turns`` turns, made without valgrind."""
    path = Path(tempfile.mkdtemp()) / "history.sqlite3"
    subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--history-file", str(path), str(turns)],
        check=True,
    )
    return path


def _instructions(store: str, count: int, history: Path | None, history_turns: int) -> int:
    """The instructions callgrind counts in a child that runs ``count`` turns."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        store,
        str(count),
        "" if history is None else str(history),
        str(history_turns),
    ]
    # A fixed hash seed: set and dict order, and so the work, is the same in every run.
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--warm", type=int, default=30)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--history", type=int, default=0)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--history-file", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        store, count, history, first = args.child
        asyncio.run(_counted(store, int(count), Path(history) if history else None, int(first)))
        return 0
    if args.history_file:
        asyncio.run(_turns(Path(args.history_file[0]), 0, int(args.history_file[1])))
        return 0
    if args.history and args.store != "sqlite":
        parser.error("--history needs --store sqlite: a session in memory ends with its process")
    if shutil.which("valgrind") is None:
        print("turn_instructions.py needs valgrind (Debian: apt-get install valgrind)")
        return 1
    history = _history(args.history) if args.history else None
    try:
        warm = _instructions(args.store, args.warm, history, args.history)
        both = _instructions(args.store, args.warm + args.turns, history, args.history)
    finally:
        if history is not None:
            shutil.rmtree(history.parent, ignore_errors=True)
    per_turn = (both - warm) / args.turns
    first = args.history + args.warm + 1
    print(
        f"dex-agents, {args.store}: {per_turn / 1e6:.2f} M instructions per turn "
        f"(turns {first}-{first + args.turns - 1}, callgrind, user space)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
