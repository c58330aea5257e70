"""The instruments of ``turn_budget.py``: counters and clocks installed around the event
loop's selector, the group commit queue, the client's calls and reads, by wrapping them.

Each wrapper counts into ``TALLY`` while its ``on`` is set, so warm-up turns count
nothing. They change no behaviour: each calls what it wraps with the same arguments.
"""

from __future__ import annotations

import asyncio
import functools
import os
import selectors
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Generator
from pathlib import Path
from typing import Any

from dex_agents.adapters.local import group_commit
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.app.session_client import PortableSessionClient


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


def instrument_client() -> None:
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


class Clock:
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


def instrument_commits() -> None:
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
        start = Clock.read()
        try:
            return commit_now(self, batch)
        finally:
            cpu, waited, off = Clock.off_cpu(start)
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


def instrument_loop(loop: asyncio.AbstractEventLoop) -> None:
    selector: selectors.BaseSelector = loop._selector  # type: ignore[attr-defined]
    select = selector.select
    self_pipe = loop._ssock.fileno()  # type: ignore[attr-defined]

    def timed_select(timeout: float | None = None) -> list[Any]:
        start = Clock.read()
        events = select(timeout)
        _, waited, took = Clock.off_cpu(start)
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


def threads() -> dict[int, tuple[str, int, int]]:
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
