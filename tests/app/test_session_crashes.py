"""Session crash tests: a real Worker child is SIGKILLed at an exact point inside a call.

Each test runs the crash agent (``tests.app.crash_agent``) in Worker children of
an ``AgentTestStack``. Tools and the model stop at ``FileGate``s, so the test
kills the Worker mid-call, starts a replacement, and reads from the
``InvocationLog`` what really ran, in which process, and how often.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.domain.events import ToolCallDeferredPayload, ToolCallFinishedPayload
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.ports.flow_client import EXECUTE_FAILED_EVENT
from dex_agents.testing import EXECUTE_COMPLETED_EVENT, Invocation
from tests.app.crash_agent import (
    STATE_DIR_ENV,
    build_crash_flow,
    invocation_log,
    model_gate,
    tool_gate,
)
from tests.app.crash_stack import Crash, crash_stack


@pytest.fixture
async def crash(tmp_path: Path) -> AsyncIterator[Crash]:
    log = invocation_log(tmp_path)
    flow = build_crash_flow()
    async with crash_stack(tmp_path, flow, "tests.app.crash_worker", STATE_DIR_ENV, log) as crash:
        yield crash


@pytest.mark.parametrize(("tool", "effect"), [("lookup", "read"), ("upsert", "idempotent_write")])
async def test_a_retryable_tool_killed_mid_call_runs_again_on_a_new_worker_with_the_same_key(
    crash: Crash, tool: str, effect: str
) -> None:
    first = await crash.stack.start_worker()
    await crash.sessions.start_session("s1", f"call {tool} {{}}")
    attempt_1 = tool_gate(crash.state_dir, tool, "call-1", 1)
    assert await crash.diagnosed(attempt_1.wait_until_reached()) == first.pid
    first.kill()
    second = await crash.stack.start_worker()
    # The started attempt failed with its Worker; attempt 2 runs on the new one.
    attempt_2 = tool_gate(crash.state_dir, tool, "call-1", 2)
    assert await crash.diagnosed(attempt_2.wait_until_reached()) == second.pid
    attempt_2.release()
    snapshot = await crash.idle()

    assert snapshot.messages[-1].text == f"{tool}={tool} done"
    assert crash.log.entries() == [
        Invocation(first.pid, "model turn-1 first"),
        Invocation(first.pid, f"{tool} s1/turn-1/call-1 attempt=1"),
        Invocation(second.pid, f"{tool} s1/turn-1/call-1 attempt=2"),
        Invocation(second.pid, "model turn-1 resume"),
    ]
    assert await crash.history("CallTool", "RecordToolFailure") == [
        ("CallTool", 2, EXECUTE_COMPLETED_EVENT)
    ]
    deferred = [e.payload for e in await crash.events() if e.type == "tool_call_deferred"]
    assert [p.effect for p in deferred if isinstance(p, ToolCallDeferredPayload)] == [effect]


async def test_a_non_idempotent_write_killed_mid_call_is_outcome_unknown_and_never_runs_twice(
    crash: Crash,
) -> None:
    first = await crash.stack.start_worker()
    await crash.sessions.start_session("s1", "call pay {}")
    gate = tool_gate(crash.state_dir, "pay", "call-1", 1)
    assert await crash.diagnosed(gate.wait_until_reached()) == first.pid
    first.kill()
    gate.release()  # a second run of attempt 1 would pass straight through and be logged
    second = await crash.stack.start_worker()
    snapshot = await crash.idle()

    assert snapshot.messages[-1].text == f"pay={OUTCOME_UNKNOWN_TOOL_RESULT}"
    assert crash.log.entries() == [
        Invocation(first.pid, "model turn-1 first"),
        Invocation(first.pid, "pay s1/turn-1/call-1 attempt=1"),
        Invocation(second.pid, "model turn-1 resume"),
    ]
    assert await crash.history("CallSingleAttemptTool", "RecordToolOutcomeUnknown") == [
        ("CallSingleAttemptTool", 1, EXECUTE_FAILED_EVENT),
        ("RecordToolOutcomeUnknown", 1, EXECUTE_COMPLETED_EVENT),
    ]
    finished = [e.payload for e in await crash.events() if e.type == "tool_call_finished"]
    assert [p.status for p in finished if isinstance(p, ToolCallFinishedPayload)] == [
        "outcome_unknown"
    ]


async def test_two_read_steps_run_in_parallel_and_both_run_again_after_a_kill(
    crash: Crash,
) -> None:
    first = await crash.stack.start_worker()
    await crash.sessions.start_session("s1", 'call lookup {"n": 1} and lookup {"n": 2}')
    # Neither gate is released, so both Steps are running at once on the one Worker.
    for call in ("call-1", "call-2"):
        gate = tool_gate(crash.state_dir, "lookup", call, 1)
        assert await crash.diagnosed(gate.wait_until_reached()) == first.pid
    first.kill()
    second = await crash.stack.start_worker()
    for call in ("call-1", "call-2"):
        gate = tool_gate(crash.state_dir, "lookup", call, 2)
        assert await crash.diagnosed(gate.wait_until_reached()) == second.pid
    for call in ("call-1", "call-2"):
        tool_gate(crash.state_dir, "lookup", call, 2).release()
    snapshot = await crash.idle()

    assert snapshot.messages[-1].text == "lookup=lookup done; lookup=lookup done"
    entries = crash.log.entries()
    assert len(entries) == 6
    assert entries[0] == Invocation(first.pid, "model turn-1 first")
    assert sorted(entries[1:3], key=lambda e: e.name) == [
        Invocation(first.pid, "lookup s1/turn-1/call-1 attempt=1"),
        Invocation(first.pid, "lookup s1/turn-1/call-2 attempt=1"),
    ]
    assert sorted(entries[3:5], key=lambda e: e.name) == [
        Invocation(second.pid, "lookup s1/turn-1/call-1 attempt=2"),
        Invocation(second.pid, "lookup s1/turn-1/call-2 attempt=2"),
    ]
    assert entries[5] == Invocation(second.pid, "model turn-1 resume")
    assert await crash.history("CallTool") == [("CallTool", 2, EXECUTE_COMPLETED_EVENT)] * 2


async def test_a_kill_during_a_model_call_reruns_only_that_model_call(crash: Crash) -> None:
    first = await crash.stack.start_worker()
    tool_gate(crash.state_dir, "lookup", "call-1", 1).release()  # the tool runs straight through
    await crash.sessions.start_session(
        "s1", "call lookup {}", session_settings={"gate_model": True}
    )
    gate = model_gate(crash.state_dir, "turn-1")
    assert await crash.diagnosed(gate.wait_until_reached()) == first.pid
    first.kill()
    gate.release()
    second = await crash.stack.start_worker()
    snapshot = await crash.idle()

    assert snapshot.messages[-1].text == "lookup=lookup done"
    assert crash.log.entries() == [
        Invocation(first.pid, "model turn-1 first"),
        Invocation(first.pid, "lookup s1/turn-1/call-1 attempt=1"),
        Invocation(first.pid, "model turn-1 resume"),
        Invocation(second.pid, "model turn-1 resume"),
    ]
    # The killed call never committed, so only two model calls count.
    assert snapshot.usage.model_calls == 2
    history = await crash.history("RunModel", "CallTool", "RecordTurnFailure")
    assert [(step, event) for step, _, event in history] == [
        ("RunModel", EXECUTE_COMPLETED_EVENT),
        ("CallTool", EXECUTE_COMPLETED_EVENT),
        ("RunModel", EXECUTE_COMPLETED_EVENT),
    ]
