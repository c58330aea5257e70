"""An approval's Step cut by a Worker SIGKILL: once it read the approval, and once it committed.

``AwaitToolApproval`` wakes when the client's approval commits; it records the
resolution and starts the call's tool Step in one commit. The Worker child
(``tests.app.approval_crash_worker``) stops inside it, at its ``invoke_agent``
span, before that commit, or after it and before the tool's Step ran; the test
kills it there and starts another. The promise: the approval is applied once
(one ``interrupt_resolved``), and ``refund``, a non-idempotent write, runs once,
on whichever Worker reaches it, with no second approval asked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.domain.events import InterruptResolvedPayload, ToolCallFinishedPayload
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.testing import Invocation, wait_for_agent_snapshot
from tests.app.approval_crash_worker import approval_gate, build_approval_crash_flow
from tests.app.crash_agent import STATE_DIR_ENV, invocation_log
from tests.app.crash_stack import Crash, crash_stack

WORKER_MODULE = "tests.app.approval_crash_worker"


@pytest.fixture
async def crash(tmp_path: Path) -> AsyncIterator[Crash]:
    flow = build_approval_crash_flow()
    log = invocation_log(tmp_path)
    async with crash_stack(tmp_path, flow, WORKER_MODULE, STATE_DIR_ENV, log) as crash:
        yield crash


async def awaiting_approval(crash: Crash) -> AgentToolCall:
    def found(snapshot: AgentSnapshot) -> AgentToolCall | None:
        status = ToolCallStatus.AWAITING_APPROVAL
        return next((r for r in snapshot.tool_calls if r.status is status), None)

    return await crash.diagnosed(
        wait_for_agent_snapshot(crash.sessions, "s1", found, description="the approval")
    )


@pytest.mark.parametrize("where", ["approval-read", "approval-committed"])
async def test_a_kill_in_an_approval_s_step_applies_it_once_and_runs_the_write_once(
    crash: Crash, where: str
) -> None:
    first = await crash.stack.start_worker()
    await crash.sessions.start_session("s1", "call refund {}")
    record = await awaiting_approval(crash)
    interrupt_id = record.interrupt_id or record.tool_call_id
    for other in {"approval-read", "approval-committed"} - {where}:
        approval_gate(crash.state_dir, other, interrupt_id).release()  # only one stop
    assert await crash.sessions.resolve_interrupt("s1", interrupt_id, approved=True)
    gate = approval_gate(crash.state_dir, where, interrupt_id)
    assert await crash.diagnosed(gate.wait_until_reached()) == first.pid
    first.kill()
    gate.release()
    second = await crash.stack.start_worker()
    snapshot = await crash.idle()

    key = f"s1/{record.turn_id}/{record.tool_call_id}"
    # The killed Worker stopped before the tool's Step: the one refund runs on the next.
    assert crash.log.entries() == [
        Invocation(first.pid, f"model {record.turn_id} first"),
        Invocation(second.pid, f"refund {key} attempt=1"),
        Invocation(second.pid, f"model {record.turn_id} resume"),
    ]
    events = await crash.events()
    resolved = [e.payload for e in events if isinstance(e.payload, InterruptResolvedPayload)]
    assert [(r.interrupt_id, r.approved) for r in resolved] == [(interrupt_id, True)]
    finished = [e.payload for e in events if isinstance(e.payload, ToolCallFinishedPayload)]
    assert [f.status for f in finished] == [ToolCallStatus.SUCCEEDED]
    assert not snapshot.pending_interrupts
    assert snapshot.usage.model_calls == 2
