"""Compaction and retention across a Worker SIGKILL: a real Worker child dies mid-phase.

The phase crash agent (``tests.app.phase_crash_agent``) compacts a session of
short turns at a small window and deletes summarized chunks past a small
retention limit, so turn 9 makes a summary call (``CompactContext``) and then a
model call whose commit deletes chunks. A Worker is killed inside each; the
next one finishes the turn. What must hold is what a run with no kill leaves:
each call that committed is counted once, one summary per generation, and
retention deletes each chunk once, with no message lost or listed twice. A
summary call that ``cancel_turn`` cancelled before the kill never runs again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.domain.events import CompactionFinishedPayload
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


async def killed_at(crash: Crash, what: str, turn: str, worker: WorkerProcess) -> WorkerProcess:
    """Kill ``worker`` once it stops at gate ``<what>-<turn>``, open the gate, start another."""
    stop = gate(crash.state_dir, what, turn)
    assert await crash.diagnosed(stop.wait_until_reached()) == worker.pid
    worker.kill()
    stop.release()  # a run that must not happen again would now pass and be logged
    return await crash.stack.start_worker()


async def eight_turns(crash: Crash) -> WorkerProcess:
    """A Worker that ran turns ``m1`` .. ``m8``; the next turn compacts through 16."""
    worker = await crash.stack.start_worker()
    await crash.sessions.start_session("s1", "m1")
    await crash.idle(1)
    for number in range(2, 9):
        assert await crash.sessions.send_user_message("s1", f"m{number}")
        await crash.idle(number)
    return worker


async def test_kills_in_a_summary_call_and_in_the_model_call_whose_commit_deletes_chunks_change_nothing(
    crash: Crash,
) -> None:
    first = await eight_turns(crash)
    assert await crash.sessions.update_session_settings("s1", {"gates": ["summary", "model"]})
    assert await crash.sessions.send_user_message("s1", "m9")
    second = await killed_at(crash, "summary", "turn-9", first)
    third = await killed_at(crash, "model", "turn-9", second)
    await crash.idle(9)
    assert await crash.sessions.update_session_settings("s1", {})
    assert await crash.sessions.send_user_message("s1", "m10")
    snapshot = await crash.idle(10)

    gated = 'settings={"gates": ["summary", "model"]}'
    assert [e for e in crash.log.entries() if "turn-9" in e.name] == [
        Invocation(first.pid, "summary turn-9 through=16"),
        Invocation(second.pid, "summary turn-9 through=16"),
        Invocation(second.pid, f"model turn-9 first {gated}"),
        Invocation(third.pid, f"model turn-9 first {gated}"),
    ]
    summary = snapshot.context_summary
    assert summary is not None
    assert (summary.generation, summary.last_sequence) == (2, 16)
    finished = [e.payload for e in await crash.events() if e.type == "compaction_finished"]
    assert [
        (p.generation, p.through_sequence)
        for p in finished
        if isinstance(p, CompactionFinishedPayload)
    ] == [(1, 8), (2, 16)]
    # Ten answers and two summaries committed; the two killed calls count nothing.
    assert snapshot.usage.model_calls == 12
    # Retention deleted [1, 2] .. [13, 14] once, as a run with no kill does.
    assert snapshot.deleted_before_sequence == 15
    page = await crash.sessions.list_agent_messages("s1", after_sequence=0, limit=200)
    assert page.deleted_before_sequence == 15
    assert [(m.sequence, m.text) for m in page.messages] == [
        (15, "m8"),
        (16, "echo: m8"),
        (17, "m9"),
        (18, "echo: m9"),
        (19, "m10"),
        (20, "echo: m10"),
    ]


async def test_a_summary_call_killed_after_cancel_turn_never_runs_again_and_the_turn_ends(
    crash: Crash,
) -> None:
    first = await eight_turns(crash)
    assert await crash.sessions.update_session_settings("s1", {"gates": ["summary"]})
    assert await crash.sessions.send_user_message("s1", "m9")
    stop = gate(crash.state_dir, "summary", "turn-9")
    assert await crash.diagnosed(stop.wait_until_reached()) == first.pid
    assert await crash.sessions.cancel_turn("s1", "turn-9")
    first.kill()
    stop.release()  # a summary call run again would now pass and be logged
    second = await crash.stack.start_worker()
    snapshot = await crash.idle(9)

    assert snapshot.state is not None
    assert snapshot.state.cancelled_turn_id == "turn-9"
    assert [e for e in crash.log.entries() if "turn-9" in e.name] == [
        Invocation(first.pid, "summary turn-9 through=16"),
    ]
    summary = snapshot.context_summary
    assert summary is not None
    assert summary.generation == 1  # the cancelled summary was dropped
    # The next turn runs on the new Worker and compacts then.
    assert await crash.sessions.update_session_settings("s1", {})
    assert await crash.sessions.send_user_message("s1", "m10")
    snapshot = await crash.idle(10)
    summary = snapshot.context_summary
    assert summary is not None
    assert summary.generation == 2
    assert {e.pid for e in crash.log.entries() if "turn-10" in e.name} == {second.pid}
