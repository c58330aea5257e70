"""Integration tests of an agent with a real Worker process that a test can SIGKILL.

``AgentTestStack`` runs on one of two engines, chosen by the ``DEXCLI``
environment variable:

- ``DEXCLI`` set: a private ``dexcli dev --engine zd`` on free loopback ports
  (``dex_agents.adapters.dex.integration_stack``), with ``dex-server-zd`` next to
  ``DEXCLI`` or at ``DEX_SERVER_ZD_BINARY``, and a ``-zd-config`` file in
  ``tmp_path`` holding ``dev.durabilityMode: processCrashSafe`` (a
  ``server_zd_config`` file of your own replaces it). Worker children serve a
  ``dex.AsyncWorker``. This mode is UNVERIFIED: no Dex server could be
  installed where it was written; only its plumbing is tested, with fake
  ``dexcli`` executables.
- ``DEXCLI`` unset: the embedded engine (``dex_agents.adapters.local``); the
  test process and each Worker child share one SQLite database in the test's
  ``tmp_path``. Worker children run with a 1 s lease and a 50 ms poll, so a
  killed Worker's Steps are taken over within seconds. ``worker_env`` may set
  ``RETRY_INTERVAL_SCALE_ENV`` (``DEX_AGENTS_TEST_RETRY_INTERVAL_SCALE``, above 0
  and at most 1) to shorten each retry policy's interval in the children.

The Worker runs ``python -m <worker_module>`` in its own process group, so
``WorkerProcess.kill()`` SIGKILLs it at an exact moment; the module calls
``run_agent_worker(flows)``, which serves the engine ``start_worker`` chose.

Inside the Worker child a tool marks a ``FileGate(state_dir, name)`` and awaits
``wait_for_release()``; the test awaits ``wait_until_reached()`` and kills the
Worker there. Two gates reached at once prove that two tool Steps run in
parallel. ``InvocationLog(path)`` counts real tool and model calls across
Worker processes. ``AgentTestStack.read_step_history(session_id)`` lists
completed Steps (``StepHistoryEntry``), through ``dexcli flow history`` in the
Dex mode, as ``read_step_history(server_address, flow_id)`` does for any Dex
server. ``wait_until(description, probe)`` and ``wait_for_agent_snapshot``
poll with a deadline instead of sleeping.

``ScriptedModelClient`` is the same class as ``dex_agents.builtin_loop``'s.

``ContextWindowSessionScenario`` runs the same session past a small context
window for any adapter's runner and checks that compaction, retention and the
summary hold (``dex_agents.app.context_window_scenario`` says what it checks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.dex.dexcli import read_flow_history, resolve_dexcli
from dex_agents.adapters.dex.integration_stack import (
    DEXCLI_ENV,
    SERVER_ADDRESS_ENV,
    DexAgentTestStack,
    run_dex_agent_worker,
)
from dex_agents.adapters.local.integration_stack import (
    DATABASE_ENV,
    LEASE_SECONDS_ENV,
    POLL_SECONDS_ENV,
    READY_DIR_ENV,
    RETRY_INTERVAL_SCALE_ENV,
    LocalAgentTestStack,
    WorkerProcess,
)
from dex_agents.adapters.local.integration_stack import run_agent_worker as run_local_agent_worker
from dex_agents.adapters.local.probes import (
    FileGate,
    Invocation,
    InvocationLog,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.app.builtin_loop.scripted_model import ScriptedModelClient
from dex_agents.app.context_window_scenario import (
    ContextWindowSessionResult,
    ContextWindowSessionScenario,
)
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_client import EXECUTE_COMPLETED_EVENT, FlowClient, StepHistoryEntry


class AgentTestStack:
    """``AgentTestStack(tmp_path, flows, worker_module, *, worker_cwd=None, worker_env=None,
    server_zd_config=None)``.

    An async context manager over the engine ``DEXCLI`` selects (``backend``: a
    ``DexAgentTestStack`` when it is set, else a ``LocalAgentTestStack``): this
    process's engine client, and Worker children started by ``await
    start_worker()`` (``python -m <worker_module>`` in ``worker_cwd`` with
    ``worker_env``); every child still running is killed on exit, and a child
    ends itself if this process dies before that.
    ``server_zd_config`` replaces the Dex mode's ``-zd-config`` file and is
    ignored on the embedded engine.
    """

    def __init__(
        self,
        tmp_path: str | os.PathLike[str],
        flows: Sequence[FlowDefinition],
        worker_module: str,
        *,
        worker_cwd: str | os.PathLike[str] | None = None,
        worker_env: Mapping[str, str] | None = None,
        server_zd_config: str | os.PathLike[str] | None = None,
    ) -> None:
        dexcli = os.environ.get(DEXCLI_ENV)
        self.backend: LocalAgentTestStack | DexAgentTestStack
        if dexcli:
            self.backend = DexAgentTestStack(
                tmp_path,
                flows,
                worker_module,
                dexcli=dexcli,
                worker_cwd=worker_cwd,
                worker_env=worker_env,
                server_zd_config=server_zd_config,
            )
        else:
            self.backend = LocalAgentTestStack(
                tmp_path, flows, worker_module, worker_cwd=worker_cwd, worker_env=worker_env
            )

    @property
    def tmp_path(self) -> Path:
        """The test's directory, which holds the engine's files and the Workers' output."""
        return self.backend.tmp_path

    @property
    def worker_dir(self) -> Path:
        """The directory with each Worker child's output and ready file."""
        return self.backend.worker_dir

    @property
    def workers(self) -> list[WorkerProcess]:
        """Every Worker child started so far, oldest first."""
        return self.backend.workers

    @property
    def database_path(self) -> Path:
        """The embedded engine's SQLite database; the Dex mode has none (``RuntimeError``)."""
        if isinstance(self.backend, DexAgentTestStack):
            raise RuntimeError(f"the Dex mode ({DEXCLI_ENV} is set) has no SQLite database")
        return self.backend.database_path

    @property
    def client(self) -> FlowClient:
        """This process's engine client (inside the ``async with`` block only)."""
        return self.backend.client

    def sessions(self, flow: AgentSessionFlow) -> AgentSessionClient:
        """An ``AgentSessionClient`` of ``flow`` (one of the stack's flows) for this process."""
        return AgentSessionClient(self.client, flow)

    async def __aenter__(self) -> Self:
        await self.backend.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.backend.__aexit__(exc_type, exc, traceback)

    async def start_worker(self) -> WorkerProcess:
        """Start ``python -m <worker_module>`` in its own process group; return once its Worker runs."""
        return await self.backend.start_worker()

    def kill_all(self) -> None:
        """SIGKILL every Worker child still running."""
        self.backend.kill_all()

    def worker_logs(self) -> str:
        """Every child's output, for a failure message."""
        return self.backend.worker_logs()

    async def read_step_history(self, session_id: str) -> list[StepHistoryEntry]:
        """The session's completed Steps, oldest first.

        On the embedded engine, Steps that finished in one commit are listed in
        the order they were created (``LocalFlowClient.read_step_history``), so
        count entries rather than rely on their order within a commit.
        """
        return await self.backend.read_step_history(session_id)


async def read_step_history(server_address: str, flow_id: str) -> list[StepHistoryEntry]:
    """A Dex session's completed Steps, oldest first, through ``dexcli flow history``.

    ``DEXCLI`` names the ``dexcli`` to run; without it this raises ``RuntimeError``
    (on the embedded engine, use ``AgentTestStack.read_step_history``). The
    command's flags and output format are unverified (see the module docstring).
    """
    dexcli = os.environ.get(DEXCLI_ENV)
    if not dexcli:
        raise RuntimeError(
            f"read_step_history(server_address, flow_id) reads a Dex server through dexcli: "
            f"set {DEXCLI_ENV}, or use AgentTestStack.read_step_history on the embedded engine"
        )
    return await read_flow_history(resolve_dexcli(dexcli), server_address, flow_id)


def run_agent_worker(flows: Sequence[FlowDefinition], *, max_concurrent_tasks: int = 16) -> None:
    """The Worker child's entry point: serve ``flows`` on the engine ``start_worker`` chose.

    With ``DEX_AGENTS_TEST_DEX_SERVER_ADDRESS`` set (the Dex mode) it serves a
    ``dex.AsyncWorker`` until SIGTERM or SIGINT (``max_concurrent_tasks`` does
    not apply: a listening Worker takes every call Dex sends). Otherwise it
    serves the SQLite database ``DEX_AGENTS_TEST_DATABASE`` names. Either way it
    writes its ready file to ``DEX_AGENTS_TEST_READY_DIR``.
    """
    if os.environ.get(SERVER_ADDRESS_ENV):
        run_dex_agent_worker(flows, os.environ)
    else:
        run_local_agent_worker(flows, max_concurrent_tasks=max_concurrent_tasks)


__all__ = [
    "DATABASE_ENV",
    "DEXCLI_ENV",
    "EXECUTE_COMPLETED_EVENT",
    "LEASE_SECONDS_ENV",
    "POLL_SECONDS_ENV",
    "READY_DIR_ENV",
    "RETRY_INTERVAL_SCALE_ENV",
    "SERVER_ADDRESS_ENV",
    "AgentTestStack",
    "ContextWindowSessionResult",
    "ContextWindowSessionScenario",
    "FileGate",
    "Invocation",
    "InvocationLog",
    "ScriptedModelClient",
    "StepHistoryEntry",
    "WorkerProcess",
    "read_step_history",
    "run_agent_worker",
    "wait_for_agent_snapshot",
    "wait_until",
]
