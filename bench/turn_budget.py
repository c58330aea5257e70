"""Where one in-process SQLite turn's wall time goes: CPU by thread, time off the CPU by
cause, and the counts behind them.

    python bench/turn_budget.py [--warm N] [--turns N] [--instructions]

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
import functools
import os
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Generator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The checkout this script is in, before an installed dex-agents: run from another
# checkout, it counts that checkout's code.
sys.path.insert(0, str(HERE.parent))

import workload  # noqa: E402

from dex_agents.adapters.local import group_commit  # noqa: E402
from dex_agents.adapters.local.client import LocalFlowClient  # noqa: E402
from dex_agents.app.session_client import PortableSessionClient  # noqa: E402
from dex_agents.local import LocalRuntime  # noqa: E402

_TOGGLE_C = "#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"


class Tally:
    """What the instruments counted while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.counts: Counter[str] = Counter()
        self.ns: Counter[str] = Counter()
        self.client_depth = 0  # > 0 inside a client step
        self.client_task: asyncio.Task[Any] | None = None  # the task the client calls run in
        self.client_works: set[int] = set()  # ids of works a client step queued
        self.toggle: Callable[[], None] | None = None  # callgrind's, in the client-only child

    def add(self, key: str, ns: int = 0, count: int = 1) -> None:
        if self.on:
            self.counts[key] += count
            self.ns[key] += ns


TALLY = Tally()


def _name(callback: Any) -> str:
    """A readable name of a loop callback: the task a future's result wakes, else its qualname."""
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        return f"task {owner.get_coro().__qualname__}"  # type: ignore[union-attr]
    return str(getattr(callback, "__qualname__", type(callback).__name__))


def _timer_name(handle: asyncio.TimerHandle) -> str:
    callback = handle._callback  # type: ignore[attr-defined]
    for argument in handle._args or ():  # type: ignore[attr-defined]
        if isinstance(argument, asyncio.Future):  # a sleep's or a wait's future
            for waiter, _ in getattr(argument, "_callbacks", None) or ():
                return _name(waiter)
    return _name(callback)


class _ClientSteps:
    """Awaits a client coroutine, timing each of its own steps on this thread's CPU clock."""

    def __init__(self, name: str, coroutine: Coroutine[Any, Any, Any]) -> None:
        self._name = name
        self._coroutine = coroutine

    def __await__(self) -> Generator[Any, Any, Any]:
        send: Any = None
        error: BaseException | None = None
        while True:
            TALLY.client_depth += 1
            if TALLY.toggle is not None and TALLY.on:
                TALLY.toggle()
            start = time.thread_time_ns()
            try:
                if error is None:
                    yielded = self._coroutine.send(send)
                else:
                    yielded = self._coroutine.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                TALLY.add(f"client CPU: {self._name}", time.thread_time_ns() - start, 0)
                if TALLY.toggle is not None and TALLY.on:
                    TALLY.toggle()
                TALLY.client_depth -= 1
            try:
                send, error = (yield yielded), None
            except BaseException as thrown:  # handed to the coroutine
                send, error = None, thrown


_CLIENT_READS = (
    "read_view",
    "read_stream",
    "stream_tail_marked",
    "session_change_mark",
    "session_changed_since",
    "describe_flow",
)
"""The embedded client's reads that ``wait_for_user`` may make, counted per turn."""


def _instrument_client() -> None:
    for name in _CLIENT_READS:
        read = getattr(LocalFlowClient, name)

        def counted(self: Any, *args: Any, _r: Any = read, _n: str = name, **kw: Any) -> Any:
            TALLY.add(f"client reads: {_n}")
            return _r(self, *args, **kw)

        setattr(LocalFlowClient, name, counted)
    for name in ("send_user_message", "wait_for_user"):
        original = getattr(PortableSessionClient, name)

        def stepped(self: Any, *args: Any, _o: Any = original, _n: str = name, **kw: Any) -> Any:
            TALLY.add(f"client calls: {_n}")
            return _ClientSteps(_n, _o(self, *args, **kw))

        setattr(PortableSessionClient, name, stepped)


class _Clock:
    """This thread's wall, CPU and waiting-for-a-CPU clocks. The wait is the kernel's
    ``/proc/thread-self/schedstat`` (one ``pread`` of a descriptor opened on the loop's
    thread), which is complete once the thread runs again; its run time is not (updated
    at the scheduler's ticks), so the CPU is ``thread_time_ns``."""

    fd = -1

    @classmethod
    def open(cls) -> None:
        cls.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)

    @classmethod
    def read(cls) -> tuple[int, int, int]:
        waited = int(os.pread(cls.fd, 100, 0).split()[1])
        return time.perf_counter_ns(), time.thread_time_ns(), waited

    @classmethod
    def off_cpu(cls, start: tuple[int, int, int]) -> tuple[int, int, int]:
        """Since ``start``: ns on the CPU, ns waiting for a CPU, ns off it (neither running
        nor waiting for a CPU)."""
        wall, run, waited = (now - then for now, then in zip(cls.read(), start, strict=True))
        return run, waited, wall - run - waited


def _instrument_commits() -> None:
    queue = group_commit.GroupCommitQueue
    run, commit_now = queue.run, queue._commit_now

    async def queued(self: Any, work: Any, *args: Any, **kw: Any) -> Any:
        task = asyncio.current_task()
        # A client's commit runs in its own task, or in the task of a hand-off to this
        # process's worker (``_then_take``), which a Step's commit never does.
        name = "" if task is None else task.get_coro().__qualname__  # type: ignore[union-attr]
        if task is TALLY.client_task or name.endswith("_then_take.<locals>.commit_and_take"):
            TALLY.client_works.add(id(work))
        try:
            return await run(self, work, *args, **kw)
        finally:
            TALLY.client_works.discard(id(work))

    def timed(self: Any, batch: Any) -> Any:
        start = _Clock.read()
        try:
            return commit_now(self, batch)
        finally:
            cpu, waited, off = _Clock.off_cpu(start)
            durable = any(item.durable for item in batch)
            TALLY.add("commits (batches)")
            TALLY.add("commits: durable", 0, int(durable))
            TALLY.add("commits: works", 0, len(batch))
            if any(id(item.work) in TALLY.client_works for item in batch):
                TALLY.add("commits: with a client's work", cpu)
            TALLY.add("commit: CPU", cpu, 0)
            TALLY.add("off CPU: inside commits (fsync, flock)", off, 0)
            TALLY.add("waiting for a CPU: inside commits", waited, 0)

    queue.run = queued  # type: ignore[method-assign]
    queue._commit_now = timed  # type: ignore[method-assign]


def _instrument_loop(loop: asyncio.AbstractEventLoop) -> None:
    selector: selectors.BaseSelector = loop._selector  # type: ignore[attr-defined]
    select = selector.select
    self_pipe = loop._ssock.fileno()  # type: ignore[attr-defined]

    def timed_select(timeout: float | None = None) -> list[Any]:
        start = _Clock.read()
        events = select(timeout)
        _, waited, took = _Clock.off_cpu(start)
        TALLY.add("selector calls")
        if timeout == 0:
            return events
        if not events:
            scheduled = loop._scheduled  # type: ignore[attr-defined]
            cause = f"timer: {_timer_name(scheduled[0])}" if scheduled else "timer: none"
        elif any(key.fd == self_pipe for key, _ in events):
            cause = "a thread's hand-off (self-pipe)"
        else:
            cause = f"file: {_name(events[0][0].data._callback)}"
        TALLY.add(f"off CPU: blocked until {cause}", took)
        TALLY.add("waiting for a CPU: after a selector's wake-up", waited, 0)
        return events

    selector.select = timed_select  # type: ignore[method-assign]
    to_thread, threadsafe = loop.run_in_executor, loop.call_soon_threadsafe

    def handed(executor: Any, func: Any, *args: Any) -> Any:
        target = func.func if isinstance(func, functools.partial) else func
        if getattr(target, "__qualname__", "") == "Context.run":  # asyncio.to_thread's
            target = func.args[0]
        TALLY.add(f"hand-off to a thread: {_name(target)}")
        return to_thread(executor, func, *args)

    def back(callback: Any, *args: Any, **kw: Any) -> Any:
        TALLY.add(f"hand-off back to the loop: {_name(callback)}")
        return threadsafe(callback, *args, **kw)

    loop.run_in_executor = handed  # type: ignore[method-assign]
    loop.call_soon_threadsafe = back  # type: ignore[method-assign]


def _threads() -> dict[int, tuple[str, int, int]]:
    """Each thread of this process: its name, ns on the CPU, ns waiting for one."""
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            run, wait, _ = (task / "schedstat").read_text().split()
        except OSError:
            continue  # it ended meanwhile
        found[int(task.name)] = (name, int(run), int(wait))
    return found


async def measure(
    warm: int, turns: int, *, instruments: bool = True, toggle: Callable[[], None] | None = None
) -> float:
    """Run the turns and return the wall seconds counted. With ``toggle`` (callgrind's)
    collect around whole turns, with no instruments; when ``TALLY.toggle`` is set, only
    inside the client's steps."""
    if TALLY.toggle is not None or instruments:
        _instrument_client()
    if instruments:
        _instrument_commits()
        _instrument_loop(asyncio.get_running_loop())
        _Clock.open()
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
        before = _threads()
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
        after = _threads()
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
