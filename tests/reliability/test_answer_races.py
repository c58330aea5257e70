"""The answer that commits first wins against ``cancel_turn``.

An ``ask_user`` answer or an approval that commits before ``cancel_turn`` is
what the call records; one that comes after returns ``False``. Before, the wait
that had taken the answer was cancelled with it, and the call recorded
``rejected`` (``turn_cancelled``) although ``answer_question`` had returned
``True``. The deterministic cases stop the worker so both RPCs commit before
any Step runs; the race case lets them race a live worker many times.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow, BuiltInTool, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.local import LocalRuntime
from dex_agents.testing import wait_for_agent_snapshot

TURN = timedelta(seconds=20)
FAST = timedelta(milliseconds=20)
REFUNDS: list[str] = []


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    REFUNDS.append(order_id)
    return f"refunded {order_id}"


def reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text="; ".join(result.output for result in results))
    if ScriptedModelClient.user_texts(request)[-1].startswith("refund"):
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("refund", {"order_id": "7"}),))
    question = {"question": "Which plan?"}
    return ScriptedModelReply(tool_calls=(ScriptedToolCall(BuiltInTool.ASK_USER, question),))


def make_flow() -> AgentSessionFlow:
    agent = AgentDefinition(
        name="races",
        instructions="Ask.",
        model=ScriptedModelClient(reply),
        tools=[refund],
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    return builtin_agent_session_flow(agent, flow_type="AnswerRaceAgent")


def tool_result(messages: tuple[AgentMessage, ...], tool_name: str) -> str:
    outputs = [m.tool_output for m in messages if m.tool_name == tool_name and m.tool_output]
    assert outputs, f"no stored result of {tool_name}"
    return outputs[-1]


async def pending_interrupt(path: Path, text: str) -> None:
    """Run a turn until its approval or question waits, then stop the worker."""
    flow = make_flow()
    async with LocalRuntime(path, [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", text)
        waiting = await sessions.wait_for_user("s-1", timeout=TURN)
        assert waiting.pending_interrupts


async def finish(path: Path) -> tuple[AgentMessage, ...]:
    flow = make_flow()
    async with LocalRuntime(path, [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        # Right after cancel_turn the interrupt may still be listed until
        # FinishTurnCancellation removes it: wait for the turn itself to end.
        await wait_for_agent_snapshot(
            sessions,
            "s-1",
            lambda s: s.state is not None and s.state.active_turn_id is None,
            description="the cancelled turn's end",
        )
        page = await sessions.list_agent_messages("s-1", limit=200)
        return page.messages


async def answer_then_cancel(path: Path, *, approved: bool | None, answer: str = "") -> None:
    flow = make_flow()
    async with LocalRuntime(path, [flow], workers=0) as runtime:
        sessions = runtime.sessions(flow)
        snapshot = await sessions.get_agent_snapshot("s-1")
        interrupt = snapshot.pending_interrupts[0]
        if interrupt.kind is InterruptKind.QUESTION:
            assert await sessions.answer_question("s-1", interrupt.interrupt_id, answer)
        else:
            assert approved is not None
            rejection = None if approved else "not this one"
            assert await sessions.resolve_interrupt(
                "s-1", interrupt.interrupt_id, approved, rejection
            )
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is not None
        assert await sessions.cancel_turn("s-1", snapshot.state.active_turn_id)


async def test_an_answer_that_commits_first_is_the_calls_result(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    await pending_interrupt(path, "which plan")
    await answer_then_cancel(path, approved=None, answer="the pro plan")
    messages = await finish(path)
    output = json.loads(tool_result(messages, BuiltInTool.ASK_USER))
    assert output.get("answer") == "the pro plan", output


async def test_a_rejection_that_commits_first_keeps_its_message(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    await pending_interrupt(path, "refund order 7")
    await answer_then_cancel(path, approved=False)
    messages = await finish(path)
    assert "not this one" in tool_result(messages, "refund")


async def test_an_approval_that_commits_first_never_runs_the_cancelled_write(
    tmp_path: Path,
) -> None:
    REFUNDS.clear()
    path = tmp_path / "db.sqlite3"
    await pending_interrupt(path, "refund order 7")
    await answer_then_cancel(path, approved=True)
    messages = await finish(path)
    assert REFUNDS == []  # the tool Step records it cancelled before the tool starts
    assert "turn_cancelled" in tool_result(messages, "refund")


async def test_an_answer_after_cancel_turn_returns_false(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    await pending_interrupt(path, "which plan")
    flow = make_flow()
    async with LocalRuntime(path, [flow], workers=0) as runtime:
        sessions = runtime.sessions(flow)
        snapshot = await sessions.get_agent_snapshot("s-1")
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is not None
        assert await sessions.cancel_turn("s-1", snapshot.state.active_turn_id)
    messages = await finish(path)
    flow = make_flow()
    async with LocalRuntime(path, [flow], workers=0) as runtime:
        late = await runtime.sessions(flow).answer_question(
            "s-1", snapshot.pending_interrupts[0].interrupt_id, "too late"
        )
    assert late is False
    assert "turn_cancelled" in tool_result(messages, BuiltInTool.ASK_USER)


@pytest.mark.parametrize("attempt", range(12))
async def test_answer_races_cancel_turn_on_a_live_worker(attempt: int, tmp_path: Path) -> None:
    """Both RPCs race the worker; whichever the answer's RPC says, the record agrees.

    ``cancel_turn`` returns ``False`` only when the answer won and its turn ended first.
    """
    flow = make_flow()
    async with LocalRuntime(tmp_path / "db.sqlite3", [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "which plan")
        waiting = await sessions.wait_for_user("s-1", timeout=TURN)
        interrupt = waiting.pending_interrupts[0]
        assert waiting.state is not None
        turn = waiting.state.active_turn_id
        assert turn is not None
        answer = asyncio.create_task(
            sessions.answer_question("s-1", interrupt.interrupt_id, "the pro plan")
        )
        if attempt % 2:
            await asyncio.sleep(0)
        cancelled = await sessions.cancel_turn("s-1", turn)
        answered = await answer
        # The worker may run the answered turn to its end before cancel_turn commits (the
        # answer's commit hands the Step straight to it); then there is nothing to cancel.
        # Both refused would mean the answer was lost.
        assert cancelled or answered
        done = await wait_for_agent_snapshot(
            sessions,
            "s-1",
            lambda s: s if s.state is not None and s.state.active_turn_id is None else None,
            description="the turn's end",
        )
        page = await sessions.list_agent_messages("s-1", limit=200)
        output = json.loads(tool_result(page.messages, BuiltInTool.ASK_USER))
        if answered:
            assert output.get("answer") == "the pro plan", output
        else:
            assert output.get("status") == "cancelled", output
        assert done.messages[-1].role is not MessageRole.USER
