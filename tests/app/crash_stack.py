"""A test stack whose Worker children a crash test SIGKILLs, and what it reads of them.

``crash_stack`` runs an ``AgentTestStack`` of one Flow, its Workers started by
the test as ``python -m <worker module>`` from the repository, with the test's
directory as their state directory (``<state_dir_env>``): the directory their
agent's ``FileGate``s and ``InvocationLog`` live in. ``Crash`` holds the stack
and reads session ``s1`` as the crash tests check it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentStatus
from dex_agents.testing import (
    RETRY_INTERVAL_SCALE_ENV,
    AgentTestStack,
    InvocationLog,
    wait_for_agent_snapshot,
)
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE
from tests.support.session_events import session_events

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Crash:
    """A test stack running a crash test's agent, with its state directory and invocation log."""

    stack: AgentTestStack
    sessions: AgentSessionClient
    state_dir: Path
    log: InvocationLog

    async def diagnosed(self, waiting: Awaitable[T]) -> T:
        """Await ``waiting``; on a timeout, fail with the Worker children's output."""
        try:
            return await waiting
        except TimeoutError as error:
            pytest.fail(f"{error}\n{self.stack.worker_logs()}")

    async def idle(self, turns: int = 1) -> AgentSnapshot:
        """Wait until ``turns`` turns have ended and the session waits for a message."""

        def ended(snapshot: AgentSnapshot) -> AgentSnapshot | None:
            state = snapshot.state
            waiting = state is not None and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
            return snapshot if waiting and state is not None and state.turn_count == turns else None

        return await self.diagnosed(
            wait_for_agent_snapshot(self.sessions, "s1", ended, description=f"turn {turns} to end")
        )

    async def events(self) -> list[AgentEvent]:
        """Every event of the session's Stream."""
        return await session_events(self.stack.client, self.sessions.flow, "s1")

    async def history(self, *step_types: str) -> list[tuple[str, int, str]]:
        """``(step_type, final_attempt, event_type)`` of the finished Steps of ``step_types``."""
        entries = await self.stack.read_step_history("s1")
        return [
            (entry.step_type, entry.final_attempt, entry.event_type)
            for entry in entries
            if entry.step_type in step_types
        ]


@contextlib.asynccontextmanager
async def crash_stack(
    state_dir: Path,
    flow: AgentSessionFlow,
    worker_module: str,
    state_dir_env: str,
    log: InvocationLog,
) -> AsyncIterator[Crash]:
    """A ``Crash`` of ``flow``, whose Workers (``python -m worker_module``, none started
    yet) find ``state_dir`` in the environment variable ``state_dir_env``."""
    async with AgentTestStack(
        state_dir,
        [flow],
        worker_module,
        worker_cwd=REPO_ROOT,
        # A killed attempt's retry waits a hundredth of its policy's interval.
        worker_env={
            state_dir_env: str(state_dir),
            RETRY_INTERVAL_SCALE_ENV: str(RETRY_INTERVAL_SCALE),
        },
    ) as stack:
        yield Crash(stack, stack.sessions(flow), state_dir, log)
