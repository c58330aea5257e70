"""A session's durable waits across a Worker SIGKILL: a question and a ``durable_wait``.

The phase crash agent's model asks ``ask_user`` or ``durable_wait`` and its
Worker child is killed while the session waits; the answer comes, or the
Timer fires, with only the replacement running. The wait survives, its call
finishes once, and no model call runs twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.domain.events import InterruptResolvedPayload, ToolCallFinishedPayload
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.testing import Invocation, wait_for_agent_snapshot
from tests.app.crash_stack import Crash
from tests.app.phase_crash_agent import gate
from tests.app.phase_crashes import phase_crash


@pytest.fixture
async def crash(tmp_path: Path) -> AsyncIterator[Crash]:
    async with phase_crash(tmp_path) as crash:
        yield crash


async def waiting(crash: Crash, status: ToolCallStatus) -> AgentToolCall:
    """The session's call once it has ``status``."""

    def found(snapshot: AgentSnapshot) -> AgentToolCall | None:
        return next((r for r in snapshot.tool_calls if r.status is status), None)

    return await crash.diagnosed(
        wait_for_agent_snapshot(crash.sessions, "s1", found, description=status.value)
    )


async def finished(crash: Crash) -> list[ToolCallStatus]:
    events = await crash.events()
    return [e.payload.status for e in events if isinstance(e.payload, ToolCallFinishedPayload)]


async def test_a_question_asked_before_a_kill_is_answered_on_the_next_worker_once(
    crash: Crash,
) -> None:
    first = await crash.stack.start_worker()
    await crash.sessions.start_session("s1", 'call ask_user {"question": "Which colour?"}')
    record = await waiting(crash, ToolCallStatus.AWAITING_ANSWER)
    first.kill()
    second = await crash.stack.start_worker()
    assert record.interrupt_id is not None
    assert await crash.sessions.answer_question("s1", record.interrupt_id, "blue")
    snapshot = await crash.idle()

    assert crash.log.entries() == [
        Invocation(first.pid, "model turn-1 first settings={}"),
        Invocation(second.pid, "model turn-1 resume settings={}"),
    ]
    assert await finished(crash) == [ToolCallStatus.SUCCEEDED]
    assert "blue" in (snapshot.messages[-1].text or "")
    assert snapshot.usage.model_calls == 2


async def test_an_answer_committed_before_a_kill_in_the_resuming_call_is_applied_once(
    crash: Crash,
) -> None:
    gated = {"gates": ["resume"]}
    first = await crash.stack.start_worker()
    await crash.sessions.start_session(
        "s1", 'call ask_user {"question": "Which colour?"}', session_settings=gated
    )
    record = await waiting(crash, ToolCallStatus.AWAITING_ANSWER)
    assert record.interrupt_id is not None
    assert await crash.sessions.answer_question("s1", record.interrupt_id, "blue")
    # AwaitQuestionAnswer committed the answer and ended the call; the resuming
    # model call it woke stops at its gate.
    resume = gate(crash.state_dir, "resume", record.turn_id)
    assert await crash.diagnosed(resume.wait_until_reached()) == first.pid
    first.kill()
    resume.release()
    second = await crash.stack.start_worker()
    snapshot = await crash.idle()

    settings = 'settings={"gates": ["resume"]}'
    assert crash.log.entries() == [
        Invocation(first.pid, f"model turn-1 first {settings}"),
        Invocation(first.pid, f"model turn-1 resume {settings}"),
        Invocation(second.pid, f"model turn-1 resume {settings}"),
    ]
    events = await crash.events()
    resolved = [e.payload for e in events if isinstance(e.payload, InterruptResolvedPayload)]
    assert [(r.interrupt_id, r.answered) for r in resolved] == [(record.interrupt_id, True)]
    assert await finished(crash) == [ToolCallStatus.SUCCEEDED]
    # The resuming call saw the one answer, once.
    assert [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT] == [
        'ask_user={"status":"answered","answer":"blue"}'
    ]
    assert not snapshot.pending_interrupts
    assert snapshot.usage.model_calls == 2  # the killed call counts nothing


async def test_a_durable_wait_s_timer_fires_on_the_next_worker_and_the_call_ends_once(
    crash: Crash,
) -> None:
    first = await crash.stack.start_worker()
    await crash.sessions.start_session(
        "s1", 'call durable_wait {"duration_seconds": 3, "reason": "let the build finish"}'
    )
    await waiting(crash, ToolCallStatus.WAITING_FOR_TIMER)
    first.kill()  # well before the Timer's 3 s, so only the replacement can see it fire
    second = await crash.stack.start_worker()
    snapshot = await crash.idle()

    assert crash.log.entries() == [
        Invocation(first.pid, "model turn-1 first settings={}"),
        Invocation(second.pid, "model turn-1 resume settings={}"),
    ]
    assert await finished(crash) == [ToolCallStatus.SUCCEEDED]
    assert snapshot.messages[-1].text == (
        'durable_wait={"status":"completed","waited_seconds":3,"reason":"let the build finish"}'
    )
