"""Integration tests on the embedded engine: a Worker child process a test can SIGKILL.

The test process opens an SQLite database under its ``tmp_path`` with a
``LocalEngine`` and a ``LocalFlowClient``; each Worker is ``python -m
<worker_module>``, a child in its own process group that calls
``run_agent_worker`` over the same database. ``FileGate`` stops a tool or a
model call inside the child at an exact point (``test_probes``).
``dex_agents.testing`` is the public face of this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Self

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.test_probes import wait_until, write_atomically
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_client import StepHistoryEntry

DATABASE_ENV = "DEX_AGENTS_TEST_DATABASE"
"""The variable that names the SQLite database a Worker child serves."""

READY_DIR_ENV = "DEX_AGENTS_TEST_READY_DIR"
"""The variable that names the directory where a Worker child writes ``worker-<pid>.ready``."""

LEASE_SECONDS_ENV = "DEX_AGENTS_TEST_LEASE_SECONDS"
"""The Worker child's lease duration in seconds (1 by default), so a killed Worker's
attempts are taken over quickly."""

POLL_SECONDS_ENV = "DEX_AGENTS_TEST_POLL_SECONDS"
"""How often the Worker child looks for other processes' commits, in seconds (0.05 by default)."""

DEFAULT_TEST_LEASE_SECONDS = 1.0
"""A Worker child's lease: a killed Worker's started attempt fails within about a second."""

DEFAULT_TEST_POLL_SECONDS = 0.05
"""How often a Worker child looks for the test process's commits."""

WORKER_START_TIMEOUT_SECONDS = 20.0
"""How long ``start_worker`` waits for a child's Worker to run."""

DATABASE_NAME = "dex-agents-test.sqlite3"
"""The SQLite database's file name in ``tmp_path``."""

WORKER_DIR_NAME = "dex-agents-workers"
"""The directory in ``tmp_path`` with each child's output and ready file."""


class WorkerProcess:
    """A running Worker child; ``kill()`` SIGKILLs its process group and reaps it."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.process = process
        self.log_path = log_path

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group ID."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once it ended (``-9`` after ``kill``), else ``None``."""
        return self.process.poll()

    def kill(self) -> None:
        """SIGKILL the child's whole process group at once and wait until it is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def output(self) -> str:
        """What the child wrote to stdout and stderr so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""


def ready_file(ready_dir: Path, pid: int) -> Path:
    """The file a Worker child writes once its Worker runs."""
    return ready_dir / f"worker-{pid}.ready"


class LocalAgentTestStack:
    """An SQLite database in ``tmp_path``, this process's engine client, and Worker children.

    Use it as an async context manager; every child still running is killed on exit.
    ``worker_env`` is added to each child's environment (it may override the lease
    and poll variables); ``worker_cwd`` is the directory the children run
    ``python -m <worker_module>`` in.
    """

    def __init__(
        self,
        tmp_path: str | os.PathLike[str],
        flows: Sequence[FlowDefinition],
        worker_module: str,
        *,
        worker_cwd: str | os.PathLike[str] | None = None,
        worker_env: Mapping[str, str] | None = None,
    ) -> None:
        if not worker_module:
            raise ValueError("worker_module must name a module to run with python -m")
        self.tmp_path = Path(tmp_path)
        self.flows = list(flows)
        self.worker_module = worker_module
        self.worker_cwd = None if worker_cwd is None else Path(worker_cwd)
        self.worker_env = dict(worker_env or {})
        self.database_path = self.tmp_path / DATABASE_NAME
        self.worker_dir = self.tmp_path / WORKER_DIR_NAME
        self.workers: list[WorkerProcess] = []
        self._store: SqliteFlowStore | None = None
        self._engine: LocalEngine | None = None
        self._client: LocalFlowClient | None = None

    @property
    def client(self) -> LocalFlowClient:
        """This process's engine client (inside the ``async with`` block only)."""
        if self._client is None:
            raise RuntimeError("use the test stack inside 'async with' first")
        return self._client

    async def __aenter__(self) -> Self:
        self.worker_dir.mkdir(parents=True, exist_ok=True)
        # The test process creates the database before any child opens it.
        self._store = SqliteFlowStore(self.database_path)
        self._engine = LocalEngine(
            self._store, self.flows, poll_interval=timedelta(milliseconds=20)
        )
        self._client = LocalFlowClient(self._engine)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill_all()
        if exc is not None:
            # pytest shows stderr of a failed test: the children's side of the story.
            print(self.worker_logs(), file=sys.stderr)
        if self._engine is not None:
            self._engine.close()
        if self._store is not None:
            self._store.close()
        self._client = self._engine = self._store = None

    def _child_env(self) -> dict[str, str]:
        return {
            **os.environ,
            LEASE_SECONDS_ENV: str(DEFAULT_TEST_LEASE_SECONDS),
            POLL_SECONDS_ENV: str(DEFAULT_TEST_POLL_SECONDS),
            **self.worker_env,
            DATABASE_ENV: str(self.database_path),
            READY_DIR_ENV: str(self.worker_dir),
        }

    def _spawn(self) -> WorkerProcess:
        # Its own session makes the child a process group leader, so kill() takes
        # down anything the Worker started too.
        log_path = self.worker_dir / f"worker-{len(self.workers) + 1}.log"
        with log_path.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", self.worker_module],
                cwd=self.worker_cwd,
                env=self._child_env(),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = WorkerProcess(process, log_path)
        self.workers.append(worker)
        return worker

    async def start_worker(self) -> WorkerProcess:
        """Start ``python -m <worker_module>`` in its own process group; return once its Worker runs."""
        if self._client is None:
            raise RuntimeError("use the test stack inside 'async with' first")
        worker = self._spawn()
        process = worker.process

        def ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError(
                    f"worker {process.pid} ({self.worker_module}) exited with "
                    f"{process.returncode}:\n{worker.output()[-4000:]}"
                )
            return ready_file(self.worker_dir, process.pid).exists()

        await wait_until(f"worker {process.pid} to run", ready, WORKER_START_TIMEOUT_SECONDS)
        return worker

    def kill_all(self) -> None:
        """SIGKILL every Worker child still running."""
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.kill()

    def worker_logs(self) -> str:
        """Every child's output, for a failure message."""
        return "\n".join(
            f"--- worker {worker.pid} ({worker.log_path.name})\n{worker.output()[-4000:]}"
            for worker in self.workers
        )

    async def read_step_history(self, session_id: str) -> list[StepHistoryEntry]:
        """The session's completed Steps, oldest first."""
        return list(await self.client.read_step_history(session_id))


async def serve_agent_worker(
    flows: Sequence[FlowDefinition],
    database_path: Path,
    ready_dir: Path | None,
    *,
    lease: timedelta,
    poll: timedelta,
    max_concurrent_tasks: int = 16,
) -> None:
    """Run a ``LocalWorker`` over ``database_path`` until the process is killed."""
    store = SqliteFlowStore(database_path)
    engine = LocalEngine(store, flows, poll_interval=poll, lease_duration=lease)
    worker = LocalWorker(
        engine, max_concurrent_tasks=max_concurrent_tasks, worker_id=f"pid-{os.getpid()}"
    )
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(0)  # the Worker's claim loop has started
    if ready_dir is not None:
        write_atomically(ready_file(ready_dir, os.getpid()), "ready")
    try:
        await task
    finally:
        engine.close()
        store.close()


def _seconds(env: Mapping[str, str], name: str, default: float) -> timedelta:
    raw = env.get(name, "")
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, not {raw!r}")
    return timedelta(seconds=value)


def run_agent_worker(flows: Sequence[FlowDefinition], *, max_concurrent_tasks: int = 16) -> None:
    """The Worker child's entry point: serve ``flows`` over the stack's database until killed.

    It reads the database from ``DEX_AGENTS_TEST_DATABASE`` and writes its ready
    file to ``DEX_AGENTS_TEST_READY_DIR``, both set by ``start_worker``.
    """
    env = os.environ
    database = env.get(DATABASE_ENV)
    if not database:
        raise RuntimeError(
            f"{DATABASE_ENV} is not set: run the Worker through AgentTestStack.start_worker"
        )
    ready_dir = env.get(READY_DIR_ENV)
    lease = _seconds(env, LEASE_SECONDS_ENV, DEFAULT_TEST_LEASE_SECONDS)
    poll = _seconds(env, POLL_SECONDS_ENV, DEFAULT_TEST_POLL_SECONDS)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s pid {os.getpid()} %(name)s: %(message)s"
    )
    asyncio.run(
        serve_agent_worker(
            flows,
            Path(database),
            Path(ready_dir) if ready_dir else None,
            lease=lease,
            poll=poll,
            max_concurrent_tasks=max_concurrent_tasks,
        )
    )
