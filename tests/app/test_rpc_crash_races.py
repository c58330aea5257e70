"""RPCs that land while a write runs, then a Worker SIGKILL: cancel, steer, settings.

The phase crash agent's ``pay`` (a non-idempotent write, no approval) stops at
its gate on a Worker child. The test acknowledges an RPC from this process
while it waits there, SIGKILLs the Worker, opens the gate and starts another.
Whatever the RPC, the killed write is recorded ``outcome_unknown`` and never
runs again, and the RPC's acknowledged effect is kept exactly once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.domain.events import ToolCallFinishedPayload
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.testing import Invocation, WorkerProcess
from tests.app.crash_stack import Crash
from tests.app.phase_crash_agent import (
    gate,
)
from tests.app.phase_crashes import phase_crash


@pytest.fixture
async def crash(tmp_path: Path) -> AsyncIterator[Crash]:
    async with phase_crash(tmp_path) as crash:
        yield crash


async def paying(crash: Crash, settings: dict[str, int]) -> WorkerProcess:
    """A Worker whose session ``s1`` has started ``pay`` and waits at its gate."""
    first = await crash.stack.start_worker()
    await crash.sessions.start_session("s1", "call pay {}", session_settings=settings)
    stop = gate(crash.state_dir, "pay", "call-1")
    assert await crash.diagnosed(stop.wait_until_reached()) == first.pid
    return first


async def killed(crash: Crash, worker: WorkerProcess) -> WorkerProcess:
    """Kill ``worker`` at ``pay``'s gate, open the gate, and start another Worker."""
    worker.kill()
    gate(crash.state_dir, "pay", "call-1").release()  # a second run would pass and be logged
    return await crash.stack.start_worker()


async def pay_statuses(crash: Crash) -> list[ToolCallStatus]:
    finished = [e.payload for e in await crash.events() if e.type == "tool_call_finished"]
    return [p.status for p in finished if isinstance(p, ToolCallFinishedPayload)]


async def test_a_write_killed_after_cancel_turn_is_outcome_unknown_and_the_turn_ends_cancelled(
    crash: Crash,
) -> None:
    first = await paying(crash, {})
    assert await crash.sessions.cancel_turn("s1", "turn-1")
    second = await killed(crash, first)
    snapshot = await crash.idle(1)

    assert crash.log.entries() == [
        Invocation(first.pid, "model turn-1 first settings={}"),
        Invocation(first.pid, "pay s1/turn-1/call-1 attempt=1"),
    ]
    assert second.pid not in {e.pid for e in crash.log.entries()}
    assert await pay_statuses(crash) == [ToolCallStatus.OUTCOME_UNKNOWN]
    assert snapshot.state is not None
    assert snapshot.state.cancelled_turn_id == "turn-1"


async def test_a_message_steered_into_a_killed_write_s_turn_is_stored_and_answered_once(
    crash: Crash,
) -> None:
    first = await paying(crash, {})
    assert await crash.sessions.steer_user_message("s1", text="stop paying")
    second = await killed(crash, first)
    snapshot = await crash.idle(2)

    entries = crash.log.entries()
    assert entries[:2] == [
        Invocation(first.pid, "model turn-1 first settings={}"),
        Invocation(first.pid, "pay s1/turn-1/call-1 attempt=1"),
    ]
    assert [e for e in entries[2:] if e.name.startswith("pay")] == []
    assert {e.pid for e in entries[2:]} == {second.pid}
    assert await pay_statuses(crash) == [ToolCallStatus.OUTCOME_UNKNOWN]
    # Between them, the steered turn's note says the write's outcome is unknown.
    first_text, note, steered = [
        m.text or "" for m in snapshot.messages if m.role is MessageRole.USER
    ]
    assert (first_text, steered) == ("call pay {}", "stop paying")
    assert "- pay {} -> outcome_unknown" in note
    answers = [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT and m.text]
    assert answers.count("echo: stop paying") == 1


async def test_settings_changed_while_a_killed_write_ran_reach_the_next_turn_only(
    crash: Crash,
) -> None:
    first = await paying(crash, {"v": 1})
    assert await crash.sessions.update_session_settings("s1", {"v": 2})
    second = await killed(crash, first)
    await crash.idle(1)
    assert await crash.sessions.send_user_message("s1", "again")
    snapshot = await crash.idle(2)

    assert crash.log.entries() == [
        Invocation(first.pid, 'model turn-1 first settings={"v": 1}'),
        Invocation(first.pid, "pay s1/turn-1/call-1 attempt=1"),
        # The killed turn resumes with the settings it started with.
        Invocation(second.pid, 'model turn-1 resume settings={"v": 1}'),
        Invocation(second.pid, 'model turn-2 first settings={"v": 2}'),
    ]
    assert await pay_statuses(crash) == [ToolCallStatus.OUTCOME_UNKNOWN]
    assert snapshot.session_settings == {"v": 2}


async def modelling(crash: Crash) -> WorkerProcess:
    """A Worker whose session ``s1`` is inside turn 1's first model call, at its gate."""
    first = await crash.stack.start_worker()
    await crash.sessions.start_session("s1", "m1", session_settings={"gates": ["model"]})
    stop = gate(crash.state_dir, "model", "turn-1")
    assert await crash.diagnosed(stop.wait_until_reached()) == first.pid
    return first


async def test_a_model_call_killed_after_a_steer_is_not_run_again_and_the_steer_starts_a_turn(
    crash: Crash,
) -> None:
    first = await modelling(crash)
    assert await crash.sessions.steer_user_message("s1", text="m2")
    first.kill()
    gate(crash.state_dir, "model", "turn-1").release()  # a call run again would be logged
    gate(crash.state_dir, "model", "turn-2").release()  # the steered turn has the gate too
    second = await crash.stack.start_worker()
    snapshot = await crash.idle(2)

    gated = 'settings={"gates": ["model"]}'
    assert crash.log.entries() == [
        Invocation(first.pid, f"model turn-1 first {gated}"),
        Invocation(second.pid, f"model turn-2 first {gated}"),
    ]
    assert [m.text for m in snapshot.messages] == ["m1", "m2", "echo: m2"]
    assert snapshot.usage.model_calls == 1


async def test_a_model_call_killed_after_cancel_turn_is_not_run_again(crash: Crash) -> None:
    first = await modelling(crash)
    assert await crash.sessions.cancel_turn("s1", "turn-1")
    first.kill()
    gate(crash.state_dir, "model", "turn-1").release()  # a call run again would be logged
    second = await crash.stack.start_worker()
    snapshot = await crash.idle(1)
    assert await crash.sessions.update_session_settings("s1", {})
    assert await crash.sessions.send_user_message("s1", "m2")
    snapshot = await crash.idle(2)

    assert crash.log.entries() == [
        Invocation(first.pid, 'model turn-1 first settings={"gates": ["model"]}'),
        Invocation(second.pid, "model turn-2 first settings={}"),
    ]
    assert snapshot.state is not None
    assert snapshot.state.cancelled_turn_id == "turn-1"
    assert snapshot.messages[-1].text == "echo: m2"
    assert snapshot.usage.model_calls == 1
