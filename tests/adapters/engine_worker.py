"""A worker process for the crash tests: ``python -m tests.adapters.engine_worker <db> <state_dir>``.

It serves ``EngineTestFlow`` over the SQLite flow store at ``<db>`` with a
``LocalWorker`` until it is killed, recording each Step invocation in
``<state_dir>/invocations.log``. Once its worker runs it writes
``<state_dir>/worker-<pid>.ready``. Settings come from the environment:

- ``ENGINE_WORKER_LEASE_SECONDS``: the lease duration (1 s), so a killed worker's
  attempts are taken over quickly;
- ``ENGINE_WORKER_POLL_SECONDS``: how often it looks for other processes' commits (0.05 s);
- ``ENGINE_WORKER_MAX_TASKS``: how many Step methods it runs at once (16);
- ``ENGINE_WORKER_ID``: its worker ID (``pid-<its pid>``), fixed to play a process restarted
  under the same ID.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from tests.adapters.engine_flows import EngineTestFlow, Probe

LEASE_ENV = "ENGINE_WORKER_LEASE_SECONDS"
POLL_ENV = "ENGINE_WORKER_POLL_SECONDS"
MAX_TASKS_ENV = "ENGINE_WORKER_MAX_TASKS"
WORKER_ID_ENV = "ENGINE_WORKER_ID"


def ready_file(state_dir: Path, pid: int) -> Path:
    """The file a worker process writes once its worker runs."""
    return state_dir / f"worker-{pid}.ready"


async def serve(db_path: Path, state_dir: Path) -> None:
    """Run a worker over ``db_path`` until the process is killed or gets SIGTERM."""
    lease = timedelta(seconds=float(os.environ.get(LEASE_ENV, "1")))
    poll = timedelta(seconds=float(os.environ.get(POLL_ENV, "0.05")))
    max_tasks = int(os.environ.get(MAX_TASKS_ENV, "16"))
    flow = EngineTestFlow(Probe(state_dir=state_dir))
    store = SqliteFlowStore(db_path)
    engine = LocalEngine(store, [flow], poll_interval=poll, lease_duration=lease)
    worker_id = os.environ.get(WORKER_ID_ENV, f"pid-{os.getpid()}")
    worker = LocalWorker(engine, max_concurrent_tasks=max_tasks, worker_id=worker_id)
    task = asyncio.create_task(worker.run())
    # SIGTERM stops the worker as run_workers does: running attempts are cancelled.
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(worker.stop()))
    ready_file(state_dir, os.getpid()).write_text("ready")
    try:
        await task
    finally:
        engine.close()
        store.close()


def main(argv: list[str]) -> int:
    """The process entry point; returns the exit status."""
    if len(argv) != 2:
        print(
            "usage: python -m tests.adapters.engine_worker <db_path> <state_dir>", file=sys.stderr
        )
        return 2
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s pid {os.getpid()} %(name)s: %(message)s"
    )
    asyncio.run(serve(Path(argv[0]), Path(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
