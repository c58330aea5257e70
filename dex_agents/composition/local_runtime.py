"""The embedded engine in one process, with a session client per Flow.

``LocalRuntime`` is the one entry point for running agents on the embedded
engine: it opens the session database (or a store in memory), starts workers
in this process, hands out an ``AgentSessionClient`` per Flow, and closes
everything in order. ``serve_workers`` and ``run_workers`` run workers only,
for extra worker processes on the same file.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Sequence
from datetime import timedelta

from dex_agents.adapters.local.engine import DEFAULT_LEASE_DURATION, DEFAULT_POLL_INTERVAL
from dex_agents.adapters.local.history_retention import DEFAULT_STEP_HISTORY_LIMIT
from dex_agents.adapters.local.runtime import DEFAULT_MAX_CONCURRENT_TASKS, EngineRuntime
from dex_agents.adapters.local.sync_client import DEFAULT_SYNC_WAKE_INTERVAL, SyncLocalFlowClient
from dex_agents.app.session_flow import PortableSessionFlow
from dex_agents.composition.session_client import AgentSessionClient
from dex_agents.composition.sync_session_client import open_sync_flow_client
from dex_agents.ports.engine import FlowDefinition


class LocalRuntime(EngineRuntime):
    """``async with LocalRuntime(path, flows) as runtime``: run agent sessions in this process.

    ``path`` is the session database, an SQLite file that any process can open
    to serve the same sessions; ``None`` keeps everything in this process's
    memory, gone when it closes. ``flows`` are the session Flows this process
    serves (one ``AgentSessionFlow`` per agent). ``workers`` workers (one by
    default; ``0`` for a client only) each run up to ``max_concurrent_tasks``
    Steps at once. ``create=False`` refuses a file that does not exist yet
    instead of creating an empty one. A faulty path raises ``DatabaseFileError``
    when the runtime opens, naming the fault. ``step_history_limit`` is how
    many finished Step executions each session keeps in the file (1,000;
    ``None`` keeps all).

    ``runtime.sessions(flow)`` is the ``AgentSessionClient`` of one Flow;
    ``runtime.flow_client`` lists, stops and inspects sessions. On exit the
    workers stop claiming (a running attempt is left to its lease, so another
    process or the next start takes it over), then the engine and the database
    close.
    """

    def sessions(self, flow: PortableSessionFlow) -> AgentSessionClient:
        """An ``AgentSessionClient`` for the sessions of ``flow``, one of this runtime's Flows."""
        if not isinstance(flow, PortableSessionFlow):
            # A type name is the likely mistake; it failed reading .flow_type off a str.
            raise TypeError(
                "sessions: flow must be one of the Flows given to LocalRuntime (an "
                f"AgentSessionFlow), not {type(flow).__name__} ({flow!r:.40})"
            )
        if not any(flow is served for served in self.flows):
            if any(flow.flow_type == served.flow_type for served in self.flows):
                # The type is served, so "not one of its Flows" read as a wrong type name.
                raise ValueError(
                    f"this Flow of type {flow.flow_type!r} is another object than the one "
                    "this runtime serves: pass the Flow given to LocalRuntime"
                )
            raise ValueError(f"Flow type {flow.flow_type!r} is not one of this runtime's Flows")
        return AgentSessionClient(self.flow_client, flow)

    def sync_flow_client(
        self, *, wake_interval: timedelta = DEFAULT_SYNC_WAKE_INTERVAL
    ) -> SyncLocalFlowClient:
        """A blocking client of this runtime's engine, for WSGI servers and other threads.

        What ``dex_agents.ui_stream``'s ``_sync`` helpers take. It runs no event loop:
        each call blocks its thread on the store, and a long poll looks for commits
        every ``wake_interval`` (50 ms). It works while the runtime is open.
        """
        return open_sync_flow_client(self, wake_interval=wake_interval)


def _require_database_path(where: str, path: object) -> None:
    # EngineRuntime takes None as a store in memory: here it served, until cancelled,
    # sessions no other process could reach, and said nothing.
    if path is None:
        raise TypeError(
            f"{where}: path must be the session database's path, not None: workers on a "
            "store in memory serve no other process; use LocalRuntime(None, flows) for that"
        )


async def serve_workers(
    path: str | os.PathLike[str],
    flows: Sequence[FlowDefinition],
    *,
    workers: int = 1,
    max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
    lease_duration: timedelta = DEFAULT_LEASE_DURATION,
    poll_interval: timedelta = DEFAULT_POLL_INTERVAL,
    stop: asyncio.Event | None = None,
    step_history_limit: int | None = DEFAULT_STEP_HISTORY_LIMIT,
) -> None:
    """Serve the sessions of ``flows`` in the database at ``path`` until ``stop`` is set.

    For extra worker processes beside the one that runs a ``LocalRuntime``: the
    database must exist already (``DatabaseFileError`` otherwise), and a ``path``
    of ``None`` (a store in memory, which no other process reaches) raises ``TypeError``. Without
    ``stop`` it serves until the task is cancelled; a worker that stops on an
    error it cannot survive ends it with that error. ``lease_duration`` (10 s
    by default) is how soon another worker takes over an attempt of a worker
    that was killed; ``poll_interval`` (100 ms) how often it looks for other
    processes' commits where it cannot watch the file's writes (on Linux it sees
    them as they land, and polls for whatever that misses). ``step_history_limit``
    is how many finished Step executions each session keeps (1,000; ``None``
    keeps all): each process prunes by its own, so give every process of one file
    the same. ``workers`` must be at least 1.
    """
    _require_database_path("serve_workers", path)
    if workers == 0 and not isinstance(workers, bool):
        # EngineRuntime takes 0 (a client), but here it served nothing and returned at once.
        raise ValueError("serve_workers needs at least 1 worker: workers=0 would serve nothing")
    async with EngineRuntime(
        path,
        flows,
        workers=workers,
        max_concurrent_tasks=max_concurrent_tasks,
        create=False,
        lease_duration=lease_duration,
        poll_interval=poll_interval,
        step_history_limit=step_history_limit,
    ) as runtime:
        stopped = asyncio.create_task((stop or asyncio.Event()).wait())
        ended = asyncio.create_task(runtime.wait_for_workers())
        try:
            await asyncio.wait({stopped, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not ended.done():
                ended.cancel()
        if ended.done() and not ended.cancelled():
            ended.result()


def run_workers(
    path: str | os.PathLike[str],
    flows: Sequence[FlowDefinition],
    *,
    workers: int = 1,
    max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
    lease_duration: timedelta = DEFAULT_LEASE_DURATION,
    poll_interval: timedelta = DEFAULT_POLL_INTERVAL,
    step_history_limit: int | None = DEFAULT_STEP_HISTORY_LIMIT,
) -> None:
    """Run ``serve_workers`` as a program's main loop until SIGTERM or SIGINT (Ctrl-C).

    The workers stop claiming when the signal arrives and hand back at once what
    they had not started; an attempt still running keeps its lease, which another
    worker takes over once this process has exited. The process waits for a
    synchronous tool still running in a thread; a second SIGTERM or SIGINT ends it
    at once, and its attempts are taken over as after a kill.
    """

    _require_database_path("run_workers", path)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stop_then_end_at_the_next_signal(received: int) -> None:
            if stop.is_set():  # a second signal that came before the default action was back
                signal.raise_signal(received)
            stop.set()
            # A cancelled attempt's thread runs on, and the interpreter waits for it at
            # exit: a second Ctrl-C did nothing while a stuck sync tool ran. The default
            # action ends the process, which hands its attempts over (worker_marks.py).
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
                signal.signal(sig, signal.SIG_DFL)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_then_end_at_the_next_signal, sig)
        await serve_workers(
            path,
            flows,
            workers=workers,
            max_concurrent_tasks=max_concurrent_tasks,
            lease_duration=lease_duration,
            poll_interval=poll_interval,
            stop=stop,
            step_history_limit=step_history_limit,
        )

    asyncio.run(main())
