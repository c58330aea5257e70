"""A wall-clock stack sampler over every thread, for ``turns.py --profile``.

cProfile sees only the thread that enabled it and charges each Python call its
own bookkeeping, which makes a small function look several times its cost. This
sampler counts, per function, the time in which it is on a busy thread's stack
(inclusive) and on top of it (self). A thread is idle when its top frame is a
wait: the event loop's ``select``, a thread pool worker's queue, a
``threading`` wait, a sleep. Time spent in C (``sqlite3``, ``fsync``) is counted
on the Python function that called it.

It samples from a ``SIGALRM`` handler, which Python runs on the main thread (the
event loop's), on the ticks of a real-time interval timer (``setitimer``). Until
2026-12-06 it sampled from a thread of its own, which can look only once it holds
the GIL: it looked mostly when the event loop's thread let the GIL go in a C call,
so the functions that make such calls took most of the samples and Python code
that holds the GIL took almost none (``sampler_check.py``: 0.0% of the samples
for a loop that took 2.7% of the time). It charged ``BEGIN IMMEDIATE`` 2.6 ms of
a 13.9 ms turn, which costs 0.05 ms a turn timed statement by statement (the first
statement after a Step's Python, where the waiting thread got the GIL).

A signal waits for no GIL release: Python runs the handler at the main thread's
next bytecode, or as a C call returns. Ticks that fall due while a C call runs
are handled together once it returns, so each sample counts the ticks it stands
for, and they go to the stack of the call's caller. Ticks that fall due while
the handler itself runs go to no function: the sampler's overhead. Other threads
(a store thread, ``asyncio.to_thread``) are read at the same moments, which come
as the main thread runs Python: where another thread holds the GIL long, its
samples lean towards its own releases, as the old sampler's did. Most of a turn
runs on the event loop's thread. Where that loop handles a signal of its own
(``run_workers`` stops on SIGTERM), Python also writes each tick to the loop's
wake-up pipe, so the loop reads it once a tick (``selector_events.py``'s
``_read_from_self`` in the profile): a cost the sampler adds.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from types import FrameType
from typing import Any

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

_IDLE = frozenset(
    {
        ("selectors.py", "select"),
        ("threading.py", "wait"),
        ("queue.py", "get"),
        ("thread.py", "_worker"),
        ("tasks.py", "sleep"),
    }
)


def _key(frame: FrameType) -> tuple[str, str]:
    return frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name


def _label(frame: FrameType) -> str:
    file, name = _key(frame)
    return f"{file}:{frame.f_code.co_firstlineno}({name})"


class StackSampler:
    """``with StackSampler() as sampler``: sample every thread until the block ends.

    Entered on the main thread only (a signal handler runs there), and it takes
    ``SIGALRM`` and the real-time interval timer for the block.
    """

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.samples = 0
        self.elapsed = 0.0
        self.busy = 0.0
        """Seconds of busy threads, summed over threads."""
        self.inclusive: defaultdict[str, float] = defaultdict(float)
        """Seconds each function was on a busy thread's stack."""
        self.self_time: defaultdict[str, float] = defaultdict(float)
        """Seconds each function was on top of a busy thread's stack."""
        self.overhead = 0.0
        """Seconds spent in the sampler's own handler, counted on no function."""
        self._ticks = 0  # the timer's ticks counted so far
        self._previous: _Handler = None

    def __enter__(self) -> StackSampler:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                "StackSampler samples from a signal handler: enter it on the main thread"
            )
        self._previous = signal.signal(signal.SIGALRM, self._sample)
        # Restarted, not interrupted: SQLite and the event loop's select see no EINTR.
        signal.siginterrupt(signal.SIGALRM, False)
        self._started = time.perf_counter()
        self._ticks = 0
        signal.setitimer(signal.ITIMER_REAL, self.interval, self.interval)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        # None: the handler before was not set from Python; the default is what it was.
        signal.signal(signal.SIGALRM, signal.SIG_DFL if self._previous is None else self._previous)
        self.elapsed = time.perf_counter() - self._started

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        now = time.perf_counter()
        due = int((now - self._started) / self.interval)
        if due <= self._ticks:
            return  # a tick that fell due while the handler ran: counted as its overhead
        self.samples += 1
        try:
            self._count(frame, (due - self._ticks) * self.interval)
        finally:
            ended = time.perf_counter()
            self._ticks = max(due, int((ended - self._started) / self.interval))
            self.overhead += ended - now

    def _count(self, frame: FrameType | None, weight: float) -> None:
        main = threading.main_thread().ident
        stacks = [frame] + [
            other for ident, other in sys._current_frames().items() if ident != main
        ]
        for top in stacks:
            if top is None or _key(top) in _IDLE:
                continue
            self.busy += weight
            self.self_time[_label(top)] += weight
            seen = set()
            current: FrameType | None = top
            while current is not None:
                label = _label(current)
                if label not in seen:  # recursion counts once per sample
                    seen.add(label)
                    self.inclusive[label] += weight
                current = current.f_back


def most(seconds: dict[str, float], count: int) -> list[tuple[str, float]]:
    """The ``count`` functions with the most seconds, most first."""
    return sorted(seconds.items(), key=lambda item: item[1], reverse=True)[:count]
