"""The embedded engine in one process: a store, its engine, a client and workers, opened in order.

``EngineRuntime`` opens a session database (or a store in memory), starts
workers in this process and closes everything in order. It is the building
block of the public ``dex_agents.local.LocalRuntime`` (which adds session
clients) and of ``dex_agents.testing``'s stacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Self

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.database_file import check_database_file
from dex_agents.adapters.local.engine import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_POLL_INTERVAL,
    LocalEngine,
    check_engine_interval,
)
from dex_agents.adapters.local.history_retention import (
    DEFAULT_STEP_HISTORY_LIMIT,
    check_step_history_limit,
)
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.registry import check_retry_interval_scale
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.worker import LocalWorker, check_max_concurrent_tasks
from dex_agents.ports.engine import ENGINE_LOGGER as logger
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_store import FlowStore

DEFAULT_MAX_CONCURRENT_TASKS = 16
"""Step executions one worker runs at once: give it at least the largest batch of tool calls."""


class EngineRuntime:
    """``async with EngineRuntime(path, flows) as runtime``: the embedded engine in this process.

    ``path`` is the session database, an SQLite file that any process can open
    to serve the same sessions (``None`` keeps everything in this process's
    memory, gone when it closes). ``flows`` are the session Flows (one
    ``AgentSessionFlow`` per agent) this process serves. ``workers`` workers
    (one by default; ``0`` for a client only) each run up to
    ``max_concurrent_tasks`` Steps at once. ``create=False`` refuses a file that
    does not exist yet instead of creating it. ``worker_id_prefix`` names the
    workers (``prefix``, or ``prefix-1``, ``prefix-2``, ... for several) in
    leases and logs; without it each gets a random ID. Two running processes of
    one file cannot share a prefix: the second one's workers stop at once with
    ``WorkerIdInUseError``. A faulty path raises
    ``DatabaseFileError`` when the runtime opens, naming the fault.
    ``step_history_limit`` is how many finished Step executions each session
    keeps in the file (1,000; ``None`` keeps all; see ``history_retention.py``).
    ``retry_interval_scale`` (1) multiplies each retry policy's interval, for
    tests that need not wait a policy's seconds (``check_retry_interval_scale``).

    On exit the workers stop claiming (a running attempt is cancelled and left
    to its lease, so another process or the next start takes it over), then the
    engine and the database close.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        flows: Sequence[FlowDefinition],
        *,
        workers: int = 1,
        max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
        create: bool = True,
        lease_duration: timedelta = DEFAULT_LEASE_DURATION,
        poll_interval: timedelta = DEFAULT_POLL_INTERVAL,
        worker_id_prefix: str | None = None,
        step_history_limit: int | None = DEFAULT_STEP_HISTORY_LIMIT,
        retry_interval_scale: float = 1.0,
    ) -> None:
        check_step_history_limit(step_history_limit)
        check_retry_interval_scale(retry_interval_scale)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ValueError(f"workers must be a whole number, 0 or more, not {workers!r}")
        given_flows: object = flows  # typed as a list, but a caller may pass one Flow
        if isinstance(given_flows, str) or hasattr(given_flows, "flow_type"):
            # One Flow given as flows failed with "'AgentSessionFlow' object is not iterable".
            raise TypeError(
                f"flows must be a list of Flows, such as [flow]; got {type(given_flows).__name__}"
            )
        given = list(flows or ())
        if not given:
            raise ValueError("an engine runtime needs at least one Flow")
        for flow in given:
            if not isinstance(getattr(flow, "flow_type", None), str):
                raise TypeError(
                    "flows must hold Flows (an AgentSessionFlow per agent); "
                    f"got {type(flow).__name__}"
                )
        # Here, not where the engine and workers are built: that is after the file is opened
        # (and maybe created), and a worker refused there left the store open.
        check_max_concurrent_tasks(max_concurrent_tasks)
        if worker_id_prefix is not None and (
            not isinstance(worker_id_prefix, str) or not worker_id_prefix
        ):
            # A number made each worker die at its start ("'int' object has no attribute
            # 'encode'"), and "" named one worker randomly but several "-1", "-2".
            raise ValueError(
                f"worker_id_prefix must be None or a non-empty string, not {worker_id_prefix!r}"
            )
        check_engine_interval("poll_interval", poll_interval)
        check_engine_interval("lease_duration", lease_duration)
        if not isinstance(create, bool):
            # "no" was taken as true and created the file the caller meant to refuse.
            raise TypeError(f"create must be True or False, not {create!r}")
        # As given: Path() drops what check_database_file refuses (a trailing slash, "").
        self._given_path = None if path is None else _path_text(path)
        self._flows = given
        self._worker_count = workers
        self._max_concurrent_tasks = max_concurrent_tasks
        self._create = create
        self._lease_duration = lease_duration
        self._poll_interval = poll_interval
        self._worker_id_prefix = worker_id_prefix
        self._step_history_limit = step_history_limit
        self._retry_interval_scale = retry_interval_scale
        self._store: FlowStore | None = None
        self._engine: LocalEngine | None = None
        self._client: LocalFlowClient | None = None
        self._workers: list[tuple[LocalWorker, asyncio.Task[None]]] = []
        self._opening = False
        self._closing = asyncio.Lock()

    @property
    def flows(self) -> tuple[FlowDefinition, ...]:
        """The Flow types this runtime serves."""
        return tuple(self._flows)

    @property
    def database_path(self) -> Path | None:
        """The session database, or ``None`` in memory."""
        return None if self._given_path is None else Path(self._given_path)

    @property
    def flow_client(self) -> LocalFlowClient:
        """The engine's client: start and stop sessions, list them, read Streams and Step history."""
        if self._client is None:
            raise RuntimeError("open the runtime with 'async with' first")
        return self._client

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Open the database and start the workers (``async with`` calls this)."""
        # Opening too: two opens at once each passed the check while the file opened in a
        # thread, and the first one's store, engine and workers were left running.
        if self._engine is not None or self._opening:
            raise RuntimeError("this runtime is open already")
        self._opening = True
        try:
            await self._open()
        finally:
            self._opening = False

    async def _open(self) -> None:
        store: FlowStore
        if self._given_path is None:
            store = MemoryFlowStore()
        else:
            path = check_database_file(self._given_path, must_exist=not self._create)
            # A runtime with no worker is a client: its RPCs go ahead of workers' commits.
            opening = asyncio.ensure_future(
                asyncio.to_thread(
                    functools.partial(SqliteFlowStore, path, client=self._worker_count == 0)
                )
            )
            try:
                store = await asyncio.shield(opening)
            except asyncio.CancelledError:
                # The thread opens the file whatever the caller does: close what it opens,
                # or its lock files stayed open for the life of the process.
                opening.add_done_callback(_close_opened_store)
                raise
        try:
            engine = LocalEngine(
                store,
                self._flows,
                poll_interval=self._poll_interval,
                lease_duration=self._lease_duration,
                step_history_limit=self._step_history_limit,
                retry_interval_scale=self._retry_interval_scale,
            )
        except BaseException:
            store.close()
            raise
        self._store, self._engine = store, engine
        self._client = LocalFlowClient(engine)
        for number in range(self._worker_count):
            worker = LocalWorker(
                engine,
                max_concurrent_tasks=self._max_concurrent_tasks,
                worker_id=self._worker_id(number),
            )
            task = asyncio.create_task(worker.run(), name=f"dex-agents {worker.worker_id}")
            task.add_done_callback(_report_worker_end)
            self._workers.append((worker, task))

    async def wait_for_workers(self) -> None:
        """Wait until every worker has stopped; raise the error that stopped the first that failed.

        Workers run until ``close``, or until an error they cannot survive.
        """
        tasks = [task for _, task in self._workers]
        if tasks:
            await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    def _worker_id(self, number: int) -> str | None:
        prefix = self._worker_id_prefix
        if prefix is None:
            return None
        return prefix if self._worker_count == 1 else f"{prefix}-{number + 1}"

    async def close(self) -> None:
        """Stop the workers, then close the engine and the database. Safe to call twice.

        A close while another one runs waits for it.
        """
        # Without the lock a second close found no workers left to stop and closed the
        # store under the first one's, which failed as they handed back their Steps.
        async with self._closing:
            await self._close()

    async def _close(self) -> None:
        workers, self._workers = self._workers, []
        for worker, _ in workers:
            await worker.stop()
        for _, task in workers:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
        if self._engine is not None:
            self._engine.close()
        if self._store is not None:
            self._store.close()
        self._engine = self._store = self._client = None


def _close_opened_store(opening: asyncio.Future[SqliteFlowStore]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


def _report_worker_end(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        logger.error("a worker stopped: %s", error, exc_info=error)


def _path_text(path: object) -> str:
    # A bytes path failed as the file opened with "a bytes-like object is required, not
    # 'str'", and a number with os.fspath's words, neither naming the argument.
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise TypeError(
            "path must be the session database's path as a str or os.PathLike of str, or "
            f"None for a store in memory, not {type(path).__name__}"
        )
    return text
