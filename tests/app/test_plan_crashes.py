"""Plan mode across Worker SIGKILLs: an approval taken while no Worker runs, and the
executing turn's model call killed.

``execute_plan`` commits the approval (``PendingPlanExecution``) in the client's
process; the executing turn starts when a Worker takes it. The phase crash
agent's Worker is killed once the planning turn ended, the plan is approved
with no Worker running, and the next Worker is killed inside the executing
turn's model call. The plan becomes active once, the executing turn starts
once, and only its killed model call runs again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.domain.messages import MessageRole
from dex_agents.domain.plans import PlanStatus
from dex_agents.domain.state import InteractionMode
from dex_agents.testing import Invocation
from tests.app.crash_stack import Crash
from tests.app.phase_crash_agent import (
    gate,
)
from tests.app.phase_crashes import phase_crash

PLAN = 'call write_todos {"todos": [{"content": "back up", "status": "pending"}]}'
GATED = 'settings={"gates": ["model"]}'


@pytest.fixture
async def crash(tmp_path: Path) -> AsyncIterator[Crash]:
    async with phase_crash(tmp_path) as crash:
        yield crash


async def test_a_plan_approved_while_no_worker_runs_executes_once_through_a_killed_model_call(
    crash: Crash,
) -> None:
    gate(crash.state_dir, "model", "turn-1").release()  # the planning turn runs straight through
    first = await crash.stack.start_worker()
    await crash.sessions.start_session(
        "s1", PLAN, plan_mode=True, session_settings={"gates": ["model"]}
    )
    await crash.idle(1)
    first.kill()
    assert await crash.sessions.execute_plan("s1", 1)
    second = await crash.stack.start_worker()
    executing = gate(crash.state_dir, "model", "turn-2")
    assert await crash.diagnosed(executing.wait_until_reached()) == second.pid
    second.kill()
    executing.release()
    third = await crash.stack.start_worker()
    snapshot = await crash.idle(2)

    assert [e for e in crash.log.entries() if "turn-2" in e.name] == [
        Invocation(second.pid, f"model turn-2 first {GATED}"),
        Invocation(third.pid, f"model turn-2 first {GATED}"),
    ]
    assert snapshot.plan is not None
    assert (snapshot.plan.revision, snapshot.plan.status) == (1, PlanStatus.ACTIVE)
    assert snapshot.state is not None
    assert snapshot.state.interaction_mode is InteractionMode.EXECUTING
    assert snapshot.pending_plan_execution is None
    turn_2 = [m for m in snapshot.messages if m.turn_id == "turn-2"]
    assert [m.role for m in turn_2] == [MessageRole.USER, MessageRole.ASSISTANT]
    started = [e for e in await crash.events() if e.type == "plan_execution_started"]
    assert len(started) == 1
    # The planning turn's call and the executing turn's committed call; not the killed one.
    assert snapshot.usage.model_calls == 3
