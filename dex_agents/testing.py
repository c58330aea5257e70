"""Integration tests of an agent with a real Worker process that a test can SIGKILL.

The spec's ``dex_agents.testing`` runs these tests against a private ``dexcli
dev --engine zd`` engine found through ``DEXCLI``. This version uses the
embedded engine instead (``dex_agents.adapters.local``): the test process and
each Worker child share one SQLite database in the test's ``tmp_path``, and a
later issue adds the Dex mode. The Worker runs ``python -m <worker_module>`` in
its own process group, so ``WorkerProcess.kill()`` SIGKILLs it at an exact
moment; Worker children run with a 1 s lease and a 50 ms poll, so a killed
Worker's Steps are taken over within seconds.

Inside the Worker child a tool marks a ``FileGate(state_dir, name)`` and awaits
``wait_for_release()``; the test awaits ``wait_until_reached()`` and kills the
Worker there. Two gates reached at once prove that two tool Steps run in
parallel. ``InvocationLog(path)`` counts real tool and model calls across
Worker processes. ``AgentTestStack.read_step_history(session_id)`` lists
completed Steps (``StepHistoryEntry``). ``wait_until(description, probe)`` and
``wait_for_agent_snapshot`` poll with a deadline instead of sleeping.

``ScriptedModelClient`` is the same class as ``dex_agents.builtin_loop``'s.
"""

from __future__ import annotations

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.test_probes import (
    FileGate,
    Invocation,
    InvocationLog,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.adapters.local.test_stack import (
    DATABASE_ENV,
    LEASE_SECONDS_ENV,
    POLL_SECONDS_ENV,
    READY_DIR_ENV,
    LocalAgentTestStack,
    WorkerProcess,
    run_agent_worker,
)
from dex_agents.app.builtin_loop.scripted_model import ScriptedModelClient
from dex_agents.ports.flow_client import EXECUTE_COMPLETED_EVENT, StepHistoryEntry


class AgentTestStack(LocalAgentTestStack):
    """``AgentTestStack(tmp_path, flows, worker_module, *, worker_cwd=None, worker_env=None)``.

    An async context manager: an SQLite database in ``tmp_path``, this process's
    engine client, and Worker children started by ``await start_worker()``
    (``python -m <worker_module>`` with ``worker_env``); every child still
    running is killed on exit.
    """

    def sessions(self, flow: AgentSessionFlow) -> AgentSessionClient:
        """An ``AgentSessionClient`` of ``flow`` (one of the stack's flows) for this process."""
        return AgentSessionClient(self.client, flow)


__all__ = [
    "DATABASE_ENV",
    "EXECUTE_COMPLETED_EVENT",
    "LEASE_SECONDS_ENV",
    "POLL_SECONDS_ENV",
    "READY_DIR_ENV",
    "AgentTestStack",
    "FileGate",
    "Invocation",
    "InvocationLog",
    "ScriptedModelClient",
    "StepHistoryEntry",
    "WorkerProcess",
    "run_agent_worker",
    "wait_for_agent_snapshot",
    "wait_until",
]
