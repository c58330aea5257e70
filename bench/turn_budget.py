"""Where one in-process SQLite turn's wall time goes: CPU by thread, time off the CPU by
cause, and the counts behind them.

    python bench/turn_budget.py [--warm N] [--turns N] [--instructions]

The instruments are in ``turn_budget_instruments.py``.

``turn_instructions.py``'s turn (``LocalRuntime`` on a temporary SQLite file, one
worker in this process, the scripted tool turn of ``workload.py``): ``--warm``
turns (30) run uncounted, then ``--turns`` turns (200) are timed and counted,
each from ``send_user_message`` until ``wait_for_user`` returns. It prints per turn:

- wall time, and each thread's time on the CPU and waiting for one (the
  kernel's ``/proc/self/task/<tid>/schedstat``, nanoseconds, every thread);
- the event loop thread's time off the CPU, split by cause: blocked in the
  selector until a thread's hand-off (the loop's self-pipe), a timer (named by
  the task whose sleep or wait it ends) or another file (the write signal's
  inotify); inside the store's commits (``GroupCommitQueue._commit_now``: wall
  less the thread's CPU, mostly the fsync and the turnstile's ``flock``\\ s); the
  rest (the GIL held by another thread, page faults, other system calls);
- counts: commits (and durable ones), selector calls and the wake-ups among them
  by cause, work handed to other threads (``run_in_executor``, and
  ``call_soon_threadsafe`` back), Stream and snapshot reads;
- the client's reads (``read_stream``, ``read_view`` and the looks ``wait_for_user``
  makes) and share: the CPU of ``send_user_message`` and ``wait_for_user``'s own
  steps (each resumption timed apart, so the worker's tasks that run between
  them are not counted), and the commits the client queued.

Times move with the machine's load; compare two checkouts by interleaved runs,
and by the counts, which do not move. ``--instructions`` runs the same turns
under ``valgrind --tool=callgrind`` twice, collecting once over whole turns and
once only inside the client's steps, and prints both per turn: CPU figures the
load cannot move (it compiles a two-line toggle library with ``cc`` and needs
valgrind's ``callgrind.h``). It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The checkout this script is in, before an installed dex-agents: run from another
# checkout, it counts that checkout's code.
sys.path.insert(0, str(HERE.parent))

import workload  # noqa: E402
from turn_budget_instruments import (  # noqa: E402
    TALLY,
    Clock,
    instrument_client,
    instrument_commits,
    instrument_loop,
    threads,
)

from dex_agents.local import LocalRuntime  # noqa: E402

_TOGGLE_C = "#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"


async def measure(
    warm: int, turns: int, *, instruments: bool = True, toggle: Callable[[], None] | None = None
) -> float:
    """Run the turns and return the wall seconds counted. With ``toggle`` (callgrind's)
    collect around whole turns, with no instruments; when ``TALLY.toggle`` is set, only
    inside the client's steps."""
    if TALLY.toggle is not None or instruments:
        instrument_client()
    if instruments:
        instrument_commits()
        instrument_loop(asyncio.get_running_loop())
        Clock.open()
    TALLY.client_task = asyncio.current_task()
    folder = Path(tempfile.mkdtemp())
    runtime = LocalRuntime(folder / "turns.sqlite3", [workload.flow], workers=1)
    await runtime.open()
    try:
        sessions = runtime.sessions(workload.flow)
        await sessions.open_session("s")
        await sessions.wait_for_user("s")
        for turn in range(warm):
            await sessions.send_user_message("s", workload.user_message(turn))
            await sessions.wait_for_user("s")
        before = threads()
        TALLY.on = True
        if toggle is not None:
            toggle()
        wall = time.perf_counter()
        for turn in range(warm, warm + turns):
            await sessions.send_user_message("s", workload.user_message(turn))
            snapshot = await sessions.wait_for_user("s")
            if not (snapshot.messages[-1].text or "").startswith("I looked it up"):
                raise RuntimeError(f"turn {turn} answered {snapshot.messages[-1].text!r}")
        wall = time.perf_counter() - wall
        if toggle is not None:
            toggle()
        TALLY.on = False
        after = threads()
    finally:
        await runtime.close()
        shutil.rmtree(folder, ignore_errors=True)
    main_thread = os.getpid()
    for tid, (name, run, waited) in after.items():
        _, run_before, wait_before = before.get(tid, (name, 0, 0))
        label = "event loop" if tid == main_thread else name
        TALLY.ns[f"thread CPU: {label}"] += run - run_before
        TALLY.ns[f"thread waiting for a CPU: {label}"] += waited - wait_before
    return wall


def _report(wall: float, turns: int) -> None:
    per = turns * 1e6  # ns -> ms per turn
    main_run = TALLY.ns["thread CPU: event loop"]
    main_wait = TALLY.ns["thread waiting for a CPU: event loop"]
    off = wall * 1e9 - main_run - main_wait
    explained = sum(ns for key, ns in TALLY.ns.items() if key.startswith("off CPU:"))
    TALLY.ns["off CPU: the rest (GIL, faults, other calls)"] = int(off - explained)
    print(f"turns {turns}, wall {wall * 1e3 / turns:.3f} ms a turn")
    print(f"event loop thread off the CPU: {off / per:.3f} ms a turn")
    print("| per turn | ms | count |\n| --- | ---: | ---: |")
    keys = sorted(set(TALLY.ns) | set(TALLY.counts))
    for key in keys:
        ms = f"{TALLY.ns[key] / per:.3f}" if TALLY.ns[key] else ""
        count = f"{TALLY.counts[key] / turns:.2f}" if TALLY.counts[key] else ""
        print(f"| {key} | {ms} | {count} |")


def _child(mode: str, warm: int, turns: int, library: str) -> None:
    toggle = ctypes.CDLL(library).toggle
    if mode == "client":
        TALLY.toggle = toggle
        asyncio.run(measure(warm, turns, instruments=False))
    else:
        asyncio.run(measure(warm, turns, instruments=False, toggle=toggle))


def _instructions(warm: int, turns: int) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        library = folder / "toggle.so"
        (folder / "toggle.c").write_text(_TOGGLE_C)
        subprocess.run(
            ["cc", "-shared", "-fPIC", "-o", str(library), str(folder / "toggle.c")], check=True
        )
        for mode in ("turn", "client"):
            log = folder / f"{mode}.log"
            subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    "--collect-atstart=no",
                    "--callgrind-out-file=/dev/null",
                    f"--log-file={log}",
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--child",
                    mode,
                    str(warm),
                    str(turns),
                    str(library),
                ],
                check=True,
                capture_output=True,
                env={**os.environ, "PYTHONHASHSEED": "0"},
            )
            found = re.search(r"Collected : (\d+)", log.read_text())
            if found is None:
                raise RuntimeError(f"callgrind printed no count for {mode}")
            what = "whole turns" if mode == "turn" else "the client's steps"
            print(f"{what}: {int(found.group(1)) / turns / 1e6:.3f} M instructions a turn")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: Sequence[str]) -> int:
    """Run the benchmark and print its budget."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--warm", type=int, default=30, help="uncounted turns first (30)")
    parser.add_argument("--turns", type=int, default=200, help="counted turns (200)")
    parser.add_argument(
        "--instructions", action="store_true", help="callgrind counts instead (20 turns)"
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, warm, turns, library = args.child
        _child(mode, int(warm), int(turns), library)
        return 0
    if args.instructions:
        _instructions(args.warm, 20 if args.turns == 200 else args.turns)
        return 0
    wall = asyncio.run(measure(args.warm, args.turns))
    _report(wall, args.turns)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
