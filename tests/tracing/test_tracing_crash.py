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

A span is exported only once its attempt's result is committed: a Worker killed
just after a model call's span ended used to leave a successful ``chat`` span
for a result it never committed, and the retry ran the call again under a second
span of the same attempt, with nothing to tell the two apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentStatus
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    RETRY_INTERVAL_SCALE_ENV,
    AgentTestStack,
    wait_for_agent_snapshot,
    wait_until,
)
from tests.app.crash_agent import STATE_DIR_ENV, invocation_log, model_gate, tool_gate
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE
from tests.tracing.traced_crash_worker import (
    SPAN_GATE_ENV,
    build_traced_crash_flow,
    span_gate,
    spans_file,
)

FAST_RETRIES = {RETRY_INTERVAL_SCALE_ENV: str(RETRY_INTERVAL_SCALE)}
"""The Worker children's retry after a kill waits a hundredth of its policy's interval."""

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
        worker_env={STATE_DIR_ENV: str(tmp_path), **FAST_RETRIES},
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
            # A span is exported just after its Step's commit, which the snapshot shows first.
            await wait_until(
                "the retry's chat span", lambda: exported(tmp_path, second.pid) or None
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


async def test_a_worker_killed_once_a_model_calls_span_is_exported_has_committed_its_result(
    tmp_path: Path,
) -> None:
    flow = build_traced_crash_flow()
    resumed = "RunModel-2"  # the model call after the tool's result
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.tracing.traced_crash_worker",
        worker_cwd=REPO_ROOT,
        worker_env={STATE_DIR_ENV: str(tmp_path), SPAN_GATE_ENV: resumed, **FAST_RETRIES},
    ) as stack:
        sessions = stack.sessions(flow)
        first = await stack.start_worker()
        tool_gate(tmp_path, "lookup", "call-1", 1).release()
        await sessions.start_session("s1", "call lookup {}")
        gate = span_gate(tmp_path, resumed)
        try:
            # The Worker stops as the resumed call's chat span is exported, and dies there.
            assert await gate.wait_until_reached() == first.pid
            first.kill()
            gate.release()
            second = await stack.start_worker()
            snapshot = await wait_for_agent_snapshot(
                sessions, "s1", turn_ended, description="the turn to end"
            )
        except TimeoutError as error:
            pytest.fail(f"{error}\n{stack.worker_logs()}")
        history = await stack.read_step_history("s1")
    assert snapshot.messages[-1].text == "lookup=lookup done"
    # The span was exported after the commit, so the kill lost nothing: the call ran once,
    # its one attempt completed, and its one span is the killed Worker's.
    assert invocation_log(tmp_path).count("model turn-1 resume") == 1
    (model_step,) = [entry for entry in history if entry.step_execution_id == resumed]
    assert (model_step.event_type, model_step.final_attempt) == (EXECUTE_COMPLETED_EVENT, 1)
    before, after = exported(tmp_path, first.pid), exported(tmp_path, second.pid)
    (chat,) = of_execution(before + after, resumed)
    assert chat in before
    assert chat["status"]["status_code"] == "UNSET"
    assert "dex.step.result_dropped" not in chat["attributes"]
