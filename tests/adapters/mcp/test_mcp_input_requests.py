"""MCP input requests as session questions, on the embedded engine, against the real test server.

``choose_account``'s task asks ``Which account?`` (a form with one ``enum`` string
field) and, like a slow server, keeps listing the answered request for a while
after ``tasks/update`` before it completes with what it received.
"""

from __future__ import annotations

from dex_agents import AgentSessionClient, AgentSnapshot
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig, McpToolSource
from dex_agents.testing import wait_for_agent_snapshot
from tests.adapters.mcp.conftest import CallLog
from tests.adapters.mcp.session_support import SESSION, calls_then_answer, outputs, session, turn
from tests.adapters.mcp.task_support import events, payloads

CHOOSE = "notes__choose_account"


async def question(sessions: AgentSessionClient) -> AgentInterrupt:
    """The session's one pending question, once it is raised."""

    def raised(snapshot: AgentSnapshot) -> AgentInterrupt | None:
        return next(iter(snapshot.pending_interrupts), None)

    return await wait_for_agent_snapshot(sessions, SESSION, raised, description="a question")


async def test_an_input_request_is_answered_through_answer_question(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([http_server])
    async with session(source, calls_then_answer((CHOOSE, {}))) as sessions:
        assert await sessions.send_user_message(SESSION, "go")
        asked = await question(sessions)
        assert (asked.interrupt_id, asked.question) == ("c1-input-1", "Which account?")
        assert asked.choices == ("checking", "savings")
        assert not await sessions.answer_question(SESSION, asked.interrupt_id, "shares")
        assert await sessions.answer_question(SESSION, asked.interrupt_id, "savings")
        snapshot = await sessions.wait_for_user(SESSION)
        raised = payloads(await events(sessions), "interrupt_raised")
    assert outputs(snapshot) == ["using {'action': 'accept', 'content': {'account': 'savings'}}"]
    # The server still listed the answered request after tasks/update; within ten
    # seconds of the send that reads as working, so the user was asked once.
    assert len(raised) == 1
    (update,) = call_log.calls("tasks/update")
    assert update["arguments"]["account"] == {"action": "accept", "content": {"account": "savings"}}
    assert len(call_log.calls("choose_account")) == 1


async def test_a_declined_input_request_sends_decline(
    http_server: McpStreamableHttpServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([http_server])
    async with session(source, calls_then_answer((CHOOSE, {}))) as sessions:
        assert await sessions.send_user_message(SESSION, "go")
        asked = await question(sessions)
        assert await sessions.resolve_interrupt(SESSION, asked.interrupt_id, False)
        snapshot = await sessions.wait_for_user(SESSION)
    assert outputs(snapshot) == ["no account: {'action': 'decline'}"]
    assert [row["arguments"]["account"] for row in call_log.calls("tasks/update")] == [
        {"action": "decline"}
    ]


async def test_a_stdio_task_asking_for_input_fails_and_is_cancelled(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    # Its process ends with the request, so no later poll could deliver an answer.
    source = McpToolSource([stdio_server])
    async with session(source, calls_then_answer((CHOOSE, {}))) as sessions:
        snapshot = await turn(sessions)
    assert outputs(snapshot) == [
        "The tool call failed: the MCP server asked for input that this agent session "
        "cannot provide yet (an answer to 'Which account?')"
    ]
    assert snapshot.pending_interrupts == ()
    assert len(call_log.calls("tasks/cancel")) == 1


async def test_an_input_request_answering_tools_call_itself_fails_and_a_state_only_one_repeats(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([stdio_server])
    model = calls_then_answer(("notes__confirm_send", {}), ("notes__repeat_once", {}))
    async with session(source, model) as sessions:
        snapshot = await turn(sessions)
    assert outputs(snapshot) == [
        "The tool call failed: the MCP server asked for input that this agent session "
        "cannot provide yet (an answer to 'Send it?')",
        "answered after again",
    ]
    assert [row["arguments"] for row in call_log.calls("repeat_once")] == [
        {"request_state": None},
        {"request_state": "again"},
    ]
