"""A wall-clock stack sampler over every thread, for ``turns.py --profile``.

cProfile sees only the thread that enabled it, and dex-agents runs its SQLite
transactions (and so its fsyncs) in ``asyncio.to_thread`` threads, where the
event loop's thread only shows time waiting in ``epoll``. This sampler wakes up
every ``interval`` seconds, reads every other thread's stack
(``sys._current_frames``) and counts, per function, the samples in which it is
on a busy thread's stack (inclusive) and on top of it (self). A thread is idle
when its top frame is a wait: the event loop's ``select``, a thread pool
worker's queue, a ``threading`` wait, a sleep. Time spent in C (``sqlite3``,
``fsync``) is counted on the Python function that called it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from types import FrameType

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
    """``with StackSampler() as sampler``: sample every other thread until the block ends."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.samples = 0
        self.elapsed = 0.0
        self.busy = 0
        self.inclusive: Counter[str] = Counter()
        self.self_time: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def __enter__(self) -> StackSampler:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.elapsed = time.perf_counter() - self._started

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            self.samples += 1
            for ident, frame in sys._current_frames().items():
                if ident == me or _key(frame) in _IDLE:
                    continue
                self.busy += 1
                self.self_time[_label(frame)] += 1
                seen = set()
                current: FrameType | None = frame
                while current is not None:
                    label = _label(current)
                    if label not in seen:  # recursion counts once per sample
                        seen.add(label)
                        self.inclusive[label] += 1
                    current = current.f_back

    def seconds(self, count: int) -> float:
        """The wall-clock time ``count`` samples stand for: the run's time over its samples."""
        return count * self.elapsed / max(self.samples, 1)
