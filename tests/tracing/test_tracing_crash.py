"""A Worker SIGKILLed mid-model-call, with spans: what the lost attempt and its retry export.

The spec ("One trace per activation"): every attempt is its own span, all
attempts of one Step execution share ``dex.step.execution_id``, and "an attempt
whose Worker died exports no span" (its ``chat`` span would start when the
attempt ends, and the process is gone). The spec promises no error span for it:
a lost attempt that had started (it heartbeated) shows as the gap before its
retry's ``dex.step.attempt`` 2; one that had not is handed out again by the
embedded engine as the same attempt 1. Either way the retried attempt's ``chat``
span, exported by the new Worker, joins the activation the killed Worker started.

Each Worker child (``tests.tracing.traced_crash_worker``) writes its spans to its
own file as they end, so the test reads exactly what each process exported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentStatus
from dex_agents.testing import EXECUTE_COMPLETED_EVENT, AgentTestStack, wait_for_agent_snapshot
from tests.app.crash_agent import STATE_DIR_ENV, model_gate, tool_gate
from tests.tracing.traced_crash_worker import build_traced_crash_flow, spans_file

REPO_ROOT = Path(__file__).resolve().parents[2]


def exported(state_dir: Path, pid: int) -> list[dict[str, Any]]:
    """The spans the Worker child ``pid`` exported, in the order they ended."""
    path = spans_file(state_dir, pid)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def of_execution(spans: list[dict[str, Any]], execution_id: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["attributes"].get("dex.step.execution_id") == execution_id]


def turn_ended(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    state = snapshot.state
    if state is not None and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE:
        return snapshot if state.turn_count == 1 else None
    return None


@pytest.mark.parametrize(
    ("heartbeat_first", "retried_attempt"),
    [
        # The lost attempt heartbeated: it counts as failed and the retry is attempt 2.
        (True, 2),
        # It sent no heartbeat or event: the engine hands the same attempt out again.
        (False, 1),
    ],
    ids=["started", "not-started"],
)
async def test_a_model_call_killed_mid_call_exports_no_span_and_its_retry_joins_the_trace(
    tmp_path: Path, heartbeat_first: bool, retried_attempt: int
) -> None:
    flow = build_traced_crash_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.tracing.traced_crash_worker",
        worker_cwd=REPO_ROOT,
        worker_env={STATE_DIR_ENV: str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        first = await stack.start_worker()
        tool_gate(tmp_path, "lookup", "call-1", 1).release()  # the tool runs straight through
        await sessions.start_session(
            "s1",
            "call lookup {}",
            session_settings={"gate_model": True, "heartbeat_first": heartbeat_first},
        )
        gate = model_gate(tmp_path, "turn-1")
        try:
            assert await gate.wait_until_reached() == first.pid
            first.kill()  # inside the second RunModel's model call
            gate.release()
            second = await stack.start_worker()
            snapshot = await wait_for_agent_snapshot(
                sessions, "s1", turn_ended, description="the turn to end"
            )
        except TimeoutError as error:
            pytest.fail(f"{error}\n{stack.worker_logs()}")
        history = await stack.read_step_history("s1")
    assert snapshot.messages[-1].text == "lookup=lookup done"
    model_steps = [entry for entry in history if entry.step_type == "RunModel"]
    assert [entry.event_type for entry in model_steps] == [EXECUTE_COMPLETED_EVENT] * 2
    killed = model_steps[1]

    before, after = exported(tmp_path, first.pid), exported(tmp_path, second.pid)
    # The killed Worker exported everything that ended before the kill: the activation's
    # root, the first model call and the tool call. So its file is a faithful record.
    (root,) = [span for span in before if span["name"].startswith("invoke_agent")]
    assert [span["attributes"]["dex.step.type"] for span in before] == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
    ]
    trace_id, root_span_id = root["context"]["trace_id"], root["context"]["span_id"]
    # The lost attempt exported no span, in either process.
    assert of_execution(before, killed.step_execution_id) == []
    # The retry's chat span: the only span of the execution, one attempt past the lost one,
    # in the root's trace, parented by the root the killed Worker stored.
    (retried,) = of_execution(before + after, killed.step_execution_id)
    attributes = retried["attributes"]
    assert retried["name"] == "chat"
    assert retried["kind"] == "SpanKind.CLIENT"
    assert attributes["dex.step.attempt"] == killed.final_attempt == retried_attempt
    assert attributes["dex.step.type"] == "RunModel"
    assert attributes["dex.agent.turn.id"] == "turn-1"
    assert retried["status"]["status_code"] != "ERROR"
    assert retried["context"]["trace_id"] == trace_id
    assert retried["parent_id"] == root_span_id
    assert [span["name"] for span in after] == ["chat"]
    # Both Workers name the same Flow run.
    assert {span["attributes"]["dex.run.id"] for span in before + after} == {
        root["attributes"]["dex.run.id"]
    }
