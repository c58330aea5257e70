"""Long-running MCP tasks in whole sessions on the embedded engine, against the real test server.

``build_report`` answers ``tools/call`` with a task of the tasks extension; its
task completes after ``seconds`` or once its release file appears.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.domain.mcp_conventions import IDEMPOTENCY_KEY_META_KEY
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import ToolTaskStarted
from dex_agents.domain.state import AgentStatus
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.mcp import (
    McpStdioServerConfig,
    McpStreamableHttpServerConfig,
    McpToolCallInterruptedError,
    McpToolSource,
)
from dex_agents.ports.flow_client import StepHistoryEntry
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.testing import AgentTestStack, wait_for_agent_snapshot, wait_until
from tests.adapters.mcp.conftest import CallLog
from tests.adapters.mcp.http_server import ROOT, HttpTestServer
from tests.adapters.mcp.mcp_test_server import release_file
from tests.adapters.mcp.session_support import SESSION, calls_then_answer, outputs, session, turn
from tests.adapters.mcp.task_support import NoEvents, events, payloads, waiting_for_task
from tests.adapters.mcp.task_worker import REPORT_NAME, URL_ENV, build_task_flow

REPORT = "notes__build_report"


async def test_a_stdio_task_is_polled_inside_the_tool_step(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    # The task lives in the server process of the call's own connection, so any
    # poll on another connection would find no task.
    source = McpToolSource([stdio_server])
    model = calls_then_answer((REPORT, {"name": "q1", "seconds": 0.3}))
    async with session(source, model) as sessions:
        snapshot = await turn(sessions)
        found = await events(sessions)
    assert outputs(snapshot) == ["report q1 ready"]
    assert payloads(found, "tool_task_started") == []
    assert [row["arguments"]["name"] for row in call_log.calls("build_report")] == ["q1"]


async def test_a_stdio_task_still_running_after_task_wait_timeout_interrupts_the_call(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    # A Step failure: CallTool sends a read or idempotent write again, other effects
    # record outcome_unknown, as for any interrupted call.
    source = McpToolSource([stdio_server], task_wait_timeout=timedelta(milliseconds=300))
    await source.list_tools()
    with pytest.raises(
        McpToolCallInterruptedError, match="did not finish within task_wait_timeout"
    ):
        await source.call_tool(REPORT, {"name": "slow", "seconds": 60}, idempotency_key="k")
    assert len(call_log.calls("build_report")) == 1
    await source.aclose()


async def test_a_task_whose_poll_interval_has_a_fraction_is_followed(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    # Found by an audit: the handle's pollIntervalMs was read as a whole number, so
    # 1500.5 failed the answer after the task started: the call was interrupted, a read
    # started a second task and a write recorded outcome_unknown. Any JSON number is an
    # interval ("Long-running MCP tasks"), as tasks/get's pollIntervalMs already was.
    source = McpToolSource([http_server])
    await source.list_tools()
    arguments = {"name": "odd", "seconds": 0.1, "poll_interval_ms": 1500.5}
    result = await source.call_tool(REPORT, arguments, idempotency_key="k")
    await source.aclose()
    assert result.output == "report odd ready"
    assert len(call_log.calls("build_report")) == 1


async def test_a_streamable_http_task_is_returned_to_the_session_and_polled_until_done(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([http_server])
    model = calls_then_answer((REPORT, {"name": "r1"}))
    async with session(source, model) as sessions:
        assert await sessions.send_user_message(SESSION, "go")
        waiting = await waiting_for_task(sessions)
        assert waiting.task_poll_interval_seconds == 1  # pollIntervalMs 100, rounded up
        release_file(call_log.path, "r1").touch()
        snapshot = await sessions.wait_for_user(SESSION)
        found = await events(sessions)
    assert outputs(snapshot) == ["report r1 ready"]
    (started,) = payloads(found, "tool_task_started")
    assert started.task_id == waiting.task_id
    statuses = payloads(found, "mcp.task_status")
    assert [(s["task_id"], s["status"]) for s in statuses] == [(waiting.task_id, "completed")]
    assert len(call_log.calls("build_report")) == 1  # a poll never calls the tool


async def test_cancel_turn_abandons_the_task_and_sends_tasks_cancel(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([http_server])
    model = calls_then_answer((REPORT, {"name": "never"}))
    async with session(source, model) as sessions:
        assert await sessions.send_user_message(SESSION, "go")
        waiting = await waiting_for_task(sessions)
        assert await sessions.cancel_turn(SESSION, waiting.turn_id)
        snapshot = await sessions.wait_for_user(SESSION)
        finished = payloads(await events(sessions), "tool_call_finished")
    assert outputs(snapshot) == [OUTCOME_UNKNOWN_TOOL_RESULT]
    assert [p.status for p in finished] == [ToolCallStatus.OUTCOME_UNKNOWN]
    assert [row["arguments"] for row in call_log.calls("tasks/cancel")] == [
        {"taskId": waiting.task_id}
    ]
    assert [row["arguments"]["name"] for row in call_log.calls("build_report")] == ["never"]


async def test_a_task_its_restarted_server_no_longer_knows_is_outcome_unknown_for_a_write(
    http_test_server: HttpTestServer, http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    # The server keeps its tasks in memory, so a restart loses them: tasks/get
    # answers -32602, and the source never calls the tool again from a poll.
    source = McpToolSource([http_server])
    model = calls_then_answer((REPORT, {"name": "lost"}))
    async with session(source, model) as sessions:
        assert await sessions.send_user_message(SESSION, "go")
        await waiting_for_task(sessions)
        killer = McpToolSource([http_server])
        await killer.list_tools()
        with pytest.raises(McpToolCallInterruptedError):
            await killer.call_tool("notes__crash_write", {})
        await killer.aclose()
        snapshot = await sessions.wait_for_user(SESSION)
        history = await sessions.flow_client.read_step_history(SESSION)
    assert outputs(snapshot) == [OUTCOME_UNKNOWN_TOOL_RESULT]
    # Recorded by the poll that read the answer, not by the failure route of a poll
    # that could not reach the server three times.
    steps = {entry.step_type for entry in history}
    assert "PollToolTask" in steps
    assert not steps & {"RecordToolFailure", "RecordToolOutcomeUnknown"}
    assert http_test_server.starts >= 2
    assert len(call_log.calls("build_report")) == 1


async def test_a_retry_with_the_task_in_its_checkpoint_resumes_it_without_calling_the_tool(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([http_server])
    listed = {tool.name: tool for tool in await source.list_tools()}
    built = source.deferred_tool_call(
        _turn(), tool_call_id="c1", tool_name=REPORT, arguments="{}", listed_tool=listed[REPORT]
    )
    call = _execution(built.tool_source_reference, checkpoint="task-7")
    assert source.will_resume_tool_task_without_sending(call)
    outcome = await source.execute_deferred_tool_call(call)
    assert outcome == ToolTaskStarted(task_id="task-7", poll_interval_seconds=1)
    assert call_log.calls("build_report") == []
    # Without the checkpoint, or for a runner that does not poll, a retry sends tools/call.
    assert not source.will_resume_tool_task_without_sending(
        _execution(built.tool_source_reference, checkpoint=None)
    )
    assert not source.will_resume_tool_task_without_sending(
        _execution(built.tool_source_reference, checkpoint="task-7", supports_tasks=False)
    )
    await source.aclose()


def _turn() -> AgentTurnContext:
    return AgentTurnContext(
        flow_id=SESSION, turn_id="t1", attempt=1, messages=(), events=NoEvents(), heartbeat=_beat
    )


def _execution(
    reference: str | None, *, checkpoint: str | None, supports_tasks: bool = True
) -> DeferredToolExecution:
    """A second attempt of call ``c1``, as the tool Step hands it over."""
    record = AgentToolCall(
        tool_call_id="c1",
        tool_name=REPORT,
        arguments="{}",
        turn_id="t1",
        effect=ToolEffect.IDEMPOTENT_WRITE,
        requires_approval=False,
        status=ToolCallStatus.APPROVED,
        deferral_order=0,
        tool_source_reference=reference,
    )
    return DeferredToolExecution(
        flow_id=SESSION,
        tool_call=record,
        idempotency_key=f"{SESSION}/t1/c1",
        attempt=2,
        events=NoEvents(),
        heartbeat=_beat,
        save_heartbeat_checkpoint=_save,
        heartbeat_checkpoint=checkpoint,
        supports_tool_tasks=supports_tasks,
    )


async def _beat() -> None:
    return None


async def _save(checkpoint: str) -> None:
    raise AssertionError(f"a resumed task saves no checkpoint, not {checkpoint!r}")


def answered(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    """The snapshot once the first turn ended with the model's answer."""
    state = snapshot.state
    done = state is not None and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    return snapshot if done and snapshot.messages[-1].text else None


async def test_a_task_is_polled_across_a_worker_sigkill_and_completed_once(
    tmp_path: Path, http_test_server: HttpTestServer, call_log: CallLog
) -> None:
    flow = build_task_flow(http_test_server.url)
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.adapters.mcp.task_worker",
        worker_cwd=ROOT,
        worker_env={URL_ENV: http_test_server.url},
    ) as stack:
        sessions = stack.sessions(flow)
        first = await stack.start_worker()
        await sessions.start_session(SESSION, "go")
        waiting = await waiting_for_task(sessions)

        def polled() -> Awaitable[StepHistoryEntry | None]:
            async def first_poll() -> StepHistoryEntry | None:
                history = await stack.read_step_history(SESSION)
                return next((e for e in history if e.step_type == "PollToolTask"), None)

            return first_poll()

        poll: StepHistoryEntry = await wait_until("a poll on the first Worker", polled)
        assert poll.final_attempt == 1
        first.kill()
        await stack.start_worker()
        release_file(call_log.path, REPORT_NAME).touch()
        snapshot = await wait_for_agent_snapshot(
            sessions, SESSION, answered, description="the final answer", timeout=30
        )
        finished = payloads(await events(sessions), "tool_call_finished")
    assert snapshot.messages[-1].text == f"report {REPORT_NAME} ready"
    assert [p.status for p in finished] == [ToolCallStatus.SUCCEEDED]
    (call,) = call_log.calls("build_report")  # the tool ran once; polls only read the task
    assert call["meta"][IDEMPOTENCY_KEY_META_KEY] == f"{SESSION}/{waiting.turn_id}/c1"
