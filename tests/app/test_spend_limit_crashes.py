"""Spend limits across a Worker crash: a real Worker child is SIGKILLed inside a usage report."""

from __future__ import annotations

from pathlib import Path

from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentStatus
from dex_agents.testing import EXECUTE_COMPLETED_EVENT, AgentTestStack, wait_for_agent_snapshot
from tests.app.spend_crash_agent import (
    STATE_DIR_ENV,
    build_spend_crash_flow,
    invocation_log,
    record_gate,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def turn_ended(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    state = snapshot.state
    if state and state.turn_count == 1 and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE:
        return snapshot
    return None


async def test_a_model_call_run_again_after_a_kill_is_reported_as_another_attempt(
    tmp_path: Path,
) -> None:
    # The kill comes after the call returned and was reported, before RunModel committed,
    # so the replacement calls the model again. Both calls cost: their reports must not
    # share the (flow_id, step_execution_id, attempt) key an application counts by.
    flow = build_spend_crash_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.app.spend_crash_worker",
        worker_cwd=REPO_ROOT,
        worker_env={STATE_DIR_ENV: str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        first = await stack.start_worker()
        await sessions.start_session("s1", "hello")
        gate = record_gate(tmp_path, "RunModel-1")
        await gate.wait_until_reached()
        first.kill()
        gate.release()
        replacement = await stack.start_worker()
        await wait_for_agent_snapshot(sessions, "s1", turn_ended, description="the turn to end")
        history = await stack.read_step_history("s1")

    entries = invocation_log(tmp_path).entries()
    assert [(entry.pid, entry.name) for entry in entries] == [
        (first.pid, "check RunModel-1 1"),
        (first.pid, "model"),
        (first.pid, "record RunModel-1 1"),
        (replacement.pid, "check RunModel-1 2"),
        (replacement.pid, "model"),
        (replacement.pid, "record RunModel-1 2"),
    ]
    run_model = [
        (entry.final_attempt, entry.event_type)
        for entry in history
        if entry.step_type == "RunModel"
    ]
    assert run_model == [(2, EXECUTE_COMPLETED_EVENT)]
