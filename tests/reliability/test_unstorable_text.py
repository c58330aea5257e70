"""Text with no UTF-8 form: a tool's result is kept, a caller's message is refused.

Before, a lone surrogate in a tool's result (common from ``os.fsdecode`` of a
file name) failed the result's commit: the read ran three times and ended
``failed``, the write ran once and was recorded ``outcome_unknown``, and both
were reported as a lost worker after the lease ran out.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.local import LocalRuntime

FILE_NAME = os.fsdecode(b"report-\xff.txt")
TURN = timedelta(seconds=20)


def make_flow(calls: list[str]) -> AgentSessionFlow:
    @function_tool(effect=ToolEffect.READ)
    def list_files() -> str:
        """List the files."""
        calls.append("list_files")
        return f"found {FILE_NAME}"

    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
    def archive(name: str) -> str:
        """Archive a file (not idempotent)."""
        calls.append("archive")
        return f"archived {FILE_NAME}"

    def reply(request: ModelRequest) -> ScriptedModelReply:
        done = [result.tool_name for result in ScriptedModelClient.tool_results(request)]
        if "list_files" not in done:
            return ScriptedModelReply(tool_calls=(ScriptedToolCall("list_files", {}),))
        if "archive" not in done:
            return ScriptedModelReply(tool_calls=(ScriptedToolCall("archive", {"name": "x"}),))
        return ScriptedModelReply(text=f"all done with {FILE_NAME}")

    agent = AgentDefinition(
        name="files",
        instructions="Tidy up.",
        model=ScriptedModelClient(reply),
        tools=[list_files, archive],
    )
    return builtin_agent_session_flow(agent, flow_type="FilesAgent")


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_tool_result_with_a_lone_surrogate_is_stored_once(
    tmp_path: Path, store: str
) -> None:
    calls: list[str] = []
    flow = make_flow(calls)
    database = None if store == "memory" else tmp_path / "db.sqlite3"
    async with LocalRuntime(database, [flow], poll_interval=timedelta(milliseconds=20)) as rt:
        sessions = rt.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "tidy up")
        # The write needs no approval here only if its policy says so; approve whatever asks.
        snapshot = await sessions.wait_for_user("s-1", timeout=TURN)
        while snapshot.pending_interrupts:
            interrupt = snapshot.pending_interrupts[0]
            await sessions.resolve_interrupt("s-1", interrupt.interrupt_id, approved=True)
            snapshot = await sessions.wait_for_user("s-1", timeout=TURN)
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None, snapshot.state.last_turn_error
        assert calls == ["list_files", "archive"]  # each ran once
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        outputs = [m.tool_output for m in snapshot.messages if m.tool_output is not None]
        assert any(FILE_NAME in output for output in outputs)
        assert snapshot.messages[-1].text == f"all done with {FILE_NAME}"
        statuses = {call.tool_name: call.status for call in snapshot.tool_calls}
        assert ToolCallStatus.OUTCOME_UNKNOWN not in statuses.values()


async def test_a_callers_message_with_a_lone_surrogate_is_refused() -> None:
    flow = make_flow([])
    async with LocalRuntime(None, [flow], workers=0) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        before = await sessions.get_agent_snapshot("s-1")
        with pytest.raises(ValueError, match=r"send_user_message: text .* lone surrogate"):
            await sessions.send_user_message("s-1", f"open {FILE_NAME}")
        assert await sessions.get_agent_snapshot("s-1") == before
