"""A summary call killed after the spend limit was told its usage, before ``CompactContext`` commits.

``CompactContext``'s one effect outside its commit is the usage report of its
summary call (``record_model_usage``). The Worker child
(``tests.app.spend_compaction_worker``) stops there on turn 5, the first that
compacts; the test kills it and starts another. The promise: the summary call
runs once more and is reported as another attempt (both calls cost, under keys
that differ), one summary is stored and finished, and the session's usage counts
only the committed calls.
"""

from __future__ import annotations

from pathlib import Path

from dex_agents.domain.events import CompactionFinishedPayload
from dex_agents.testing import Invocation
from tests.app.crash_stack import crash_stack
from tests.app.phase_crash_agent import STATE_DIR_ENV, gate, invocation_log
from tests.app.spend_compaction_worker import build_spend_compaction_flow

WORKER_MODULE = "tests.app.spend_compaction_worker"


async def test_a_summary_call_killed_once_its_usage_was_reported_runs_once_more_as_attempt_2(
    tmp_path: Path,
) -> None:
    flow, log = build_spend_compaction_flow(), invocation_log(tmp_path)
    async with crash_stack(tmp_path, flow, WORKER_MODULE, STATE_DIR_ENV, log) as crash:
        first = await crash.stack.start_worker()
        await crash.sessions.start_session("s1", "m1")
        await crash.idle(1)
        for number in range(2, 6):
            assert await crash.sessions.send_user_message("s1", f"m{number}")
            if number < 5:
                await crash.idle(number)
        recorded = gate(tmp_path, "record", "CompactContext-1")
        assert await crash.diagnosed(recorded.wait_until_reached()) == first.pid
        first.kill()
        recorded.release()
        second = await crash.stack.start_worker()
        snapshot = await crash.idle(5)
        finished = [e.payload for e in await crash.events() if e.type == "compaction_finished"]
        history = await crash.history("CompactContext")

    assert [e for e in log.entries() if not e.name.startswith("model")] == [
        Invocation(first.pid, "spend check CompactContext-1 1"),
        Invocation(first.pid, "summary turn-5 through=8"),
        Invocation(first.pid, "spend record CompactContext-1 1"),
        Invocation(second.pid, "spend check CompactContext-1 2"),
        Invocation(second.pid, "summary turn-5 through=8"),
        Invocation(second.pid, "spend record CompactContext-1 2"),
    ]
    assert [h[:2] for h in history] == [("CompactContext", 2)]
    summary = snapshot.context_summary
    assert summary is not None
    assert (summary.generation, summary.last_sequence) == (1, 8)
    assert [
        (p.generation, p.through_sequence)
        for p in finished
        if isinstance(p, CompactionFinishedPayload)
    ] == [(1, 8)]
    # Five answers and one summary committed; the killed summary call counts nothing.
    assert snapshot.usage.model_calls == 6
