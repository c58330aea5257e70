"""A worker process for ``throughput.py``: ``python bench/turn_worker.py PATH [TIMES]``.

It serves the workload's Flow in the session database at ``PATH`` until
SIGTERM, with dex-agents' default worker settings. Given ``TIMES``, it also
writes there, as it exits, how long each of its write transactions took
(``SqliteFlowStore.run`` and ``run_batch``, one per line, in seconds), so the
client can set the time its RPCs waited beside the commits they waited behind.
"""

from __future__ import annotations

import atexit
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import workload

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.local import run_workers


def record_write_transactions(times: Path) -> None:
    """Time every write transaction of this process's stores, and write the times at exit."""
    seconds: list[float] = []

    def timed(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                seconds.append(time.perf_counter() - started)

        return run

    SqliteFlowStore.run = timed(SqliteFlowStore.run)  # type: ignore[method-assign]
    SqliteFlowStore.run_batch = timed(SqliteFlowStore.run_batch)  # type: ignore[method-assign]
    atexit.register(lambda: times.write_text("".join(f"{each!r}\n" for each in seconds)))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        record_write_transactions(Path(sys.argv[2]))
    run_workers(sys.argv[1], [workload.flow])
