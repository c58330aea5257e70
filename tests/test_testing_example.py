"""The spec's "Testing an adapter" example, run against the embedded engine."""

from __future__ import annotations

from pathlib import Path

from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentStatus
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    Invocation,
    wait_for_agent_snapshot,
)
from tests.my_agent import build_flow, invocation_log

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def turn_ended(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    state = snapshot.state
    if state and state.turn_count == 1 and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE:
        return snapshot
    return None


async def test_write_survives_a_worker_kill(tmp_path: Path) -> None:
    flow = build_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.my_worker",
        worker_cwd=PACKAGE_DIR,
        worker_env={"MY_STATE_DIR": str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        worker = await stack.start_worker()
        await sessions.start_session("session-1", "refund order 7")
        interrupt = await wait_for_agent_snapshot(
            sessions,
            "session-1",
            lambda snapshot: next(iter(snapshot.pending_interrupts), None),
            description="a pending approval",
        )
        worker.kill()  # SIGKILL while the session waits
        replacement = await stack.start_worker()  # replacement Worker
        assert await sessions.resolve_interrupt("session-1", interrupt.interrupt_id, approved=True)
        snapshot = await wait_for_agent_snapshot(
            sessions, "session-1", turn_ended, description="the turn to end"
        )
        history = await stack.read_step_history("session-1")
        executed = [
            entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT
        ]

        assert worker.returncode == -9
        assert invocation_log(tmp_path).entries() == [Invocation(replacement.pid, "refund")]
        assert executed.count("CallSingleAttemptTool") == 1
        assert executed.count("AwaitToolApproval") == 1
        assert snapshot.messages[-1].text == "refund=refunded order 7"
