"""Integration tests on the embedded engine: a Worker child process a test can SIGKILL.

The test process opens an SQLite database under its ``tmp_path`` with a
``LocalEngine`` and a ``LocalFlowClient``; each Worker is ``python -m
<worker_module>``, a child in its own process group that calls
``run_agent_worker`` over the same database. ``FileGate`` stops a tool or a
model call inside the child at an exact point (``probes``). Starting,
killing and reading the children is ``WorkerChildren``'s (``worker_children``,
whose names this module re-exports). ``dex_agents.testing`` is the public face
of this module.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Self

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.probes import write_atomically
from dex_agents.adapters.local.runtime import EngineRuntime
from dex_agents.adapters.local.worker_children import (
    READY_DIR_ENV,
    WORKER_DIR_NAME,
    WORKER_START_TIMEOUT_SECONDS,
    WorkerChildren,
    WorkerChildrenOwner,
    WorkerProcess,
    end_with_parent,
    ready_file,
)
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_client import StepHistoryEntry

DATABASE_ENV = "DEX_AGENTS_TEST_DATABASE"
"""The variable that names the SQLite database a Worker child serves."""

LEASE_SECONDS_ENV = "DEX_AGENTS_TEST_LEASE_SECONDS"
"""The Worker child's lease duration in seconds (1 by default), so a killed Worker's
attempts are taken over quickly."""

POLL_SECONDS_ENV = "DEX_AGENTS_TEST_POLL_SECONDS"
"""How often the Worker child looks for other processes' commits, in seconds (0.05 by default)."""

RETRY_INTERVAL_SCALE_ENV = "DEX_AGENTS_TEST_RETRY_INTERVAL_SCALE"
"""What the Worker child's engine multiplies each retry policy's interval by (1 by default,
the intervals as they are): a test of a killed attempt's retry need not wait the policy's
second (``retry_interval_scale``, above 0 and at most 1)."""

DEFAULT_TEST_LEASE_SECONDS = 1.0
"""A Worker child's lease: a killed Worker's started attempt fails within about a second."""

DEFAULT_TEST_POLL_SECONDS = 0.05
"""How often a Worker child looks for the test process's commits."""

DATABASE_NAME = "dex-agents-test.sqlite3"
"""The SQLite database's file name in ``tmp_path``."""


class LocalAgentTestStack(WorkerChildrenOwner):
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
        self.tmp_path = Path(tmp_path)
        self.children = WorkerChildren(worker_module, self.tmp_path / WORKER_DIR_NAME, worker_cwd)
        self.flows = list(flows)
        self.worker_env = dict(worker_env or {})
        self.database_path = self.tmp_path / DATABASE_NAME
        self._runtime: EngineRuntime | None = None

    @property
    def client(self) -> LocalFlowClient:
        """This process's engine client (inside the ``async with`` block only)."""
        if self._runtime is None:
            raise RuntimeError("use the test stack inside 'async with' first")
        return self._runtime.flow_client

    async def __aenter__(self) -> Self:
        self.worker_dir.mkdir(parents=True, exist_ok=True)
        # The test process creates the database before any child opens it; it runs no worker.
        runtime = EngineRuntime(
            self.database_path, self.flows, workers=0, poll_interval=timedelta(milliseconds=20)
        )
        await runtime.open()
        self._runtime = runtime
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
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            await runtime.close()

    def _worker_child_env(self) -> dict[str, str]:
        if self._runtime is None:
            raise RuntimeError("use the test stack inside 'async with' first")
        return {
            LEASE_SECONDS_ENV: str(DEFAULT_TEST_LEASE_SECONDS),
            POLL_SECONDS_ENV: str(DEFAULT_TEST_POLL_SECONDS),
            **self.worker_env,
            DATABASE_ENV: str(self.database_path),
        }

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
    retry_interval_scale: float = 1.0,
) -> None:
    """Run a ``LocalWorker`` over ``database_path`` until the process is killed."""
    async with EngineRuntime(
        database_path,
        flows,
        workers=1,
        max_concurrent_tasks=max_concurrent_tasks,
        create=False,
        lease_duration=lease,
        poll_interval=poll,
        worker_id_prefix=f"pid-{os.getpid()}",
        retry_interval_scale=retry_interval_scale,
    ) as runtime:
        await asyncio.sleep(0)  # the Worker's claim loop has started
        if ready_dir is not None:
            write_atomically(ready_file(ready_dir, os.getpid()), "ready")
        await runtime.wait_for_workers()


def _seconds(env: Mapping[str, str], name: str, default: float) -> timedelta:
    raw = env.get(name, "")
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, not {raw!r}")
    if not math.isfinite(value):
        # timedelta() said only "cannot convert float NaN to integer" for these.
        raise ValueError(f"{name} must be a finite number of seconds, not {raw!r}")
    return timedelta(seconds=value)


def _retry_interval_scale(env: Mapping[str, str]) -> float:
    raw = env.get(RETRY_INTERVAL_SCALE_ENV, "")
    try:
        value = float(raw) if raw else 1.0
    except ValueError:
        raise ValueError(f"{RETRY_INTERVAL_SCALE_ENV} must be a number, not {raw!r}") from None
    if not 0 < value <= 1:  # also refuses NaN
        raise ValueError(f"{RETRY_INTERVAL_SCALE_ENV} must be above 0 and at most 1, not {raw!r}")
    return value


def run_agent_worker(flows: Sequence[FlowDefinition], *, max_concurrent_tasks: int = 16) -> None:
    """The Worker child's entry point: serve ``flows`` over the stack's database until killed.

    It reads the database from ``DEX_AGENTS_TEST_DATABASE`` and writes its ready
    file to ``DEX_AGENTS_TEST_READY_DIR``, both set by ``start_worker``, and ends
    once the test process that started it is gone.
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
    scale = _retry_interval_scale(env)
    end_with_parent(env)
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
            retry_interval_scale=scale,
        )
    )


__all__ = [
    "DATABASE_ENV",
    "DATABASE_NAME",
    "DEFAULT_TEST_LEASE_SECONDS",
    "DEFAULT_TEST_POLL_SECONDS",
    "LEASE_SECONDS_ENV",
    "POLL_SECONDS_ENV",
    "READY_DIR_ENV",
    "RETRY_INTERVAL_SCALE_ENV",
    "WORKER_DIR_NAME",
    "WORKER_START_TIMEOUT_SECONDS",
    "LocalAgentTestStack",
    "WorkerProcess",
    "ready_file",
    "run_agent_worker",
    "serve_agent_worker",
]
