"""Every ``AgentSessionClient`` door refuses a wrong-typed argument or a bad session ID before it sends.

Each refused call is made on a session that waits for the approval of a
non-idempotent write, and must leave its snapshot (queue, interrupts, tool
calls, messages) as it was and the write unrun. The checks run before the
engine is reached, so these tests use the in-memory store only.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from dex_agents import AgentSessionClient
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.errors import InvalidSessionIdError, WireFormatError
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.requests import ResolveInterruptRequest
from dex_agents.domain.session_ids import MAX_SESSION_ID_BYTES
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from tests.app.harness import Session, echo, session_stack
from tests.app.scripted_runner import ScriptedRunner

Call = Callable[[AgentSessionClient], Awaitable[Any]]


@pytest.fixture
async def awaiting_approval() -> AsyncIterator[Session]:
    """Session ``s1`` waiting for the approval of ``refund`` (interrupt ``call-1``)."""
    runner = ScriptedRunner(tools={"refund": echo})
    options = AgentSessionOptions(
        tool_policies={"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}
    )
    async with session_stack(MemoryFlowStore(), runner, options) as session:
        await session.sessions.start_session("s1", 'call refund {"order": 7}')
        await session.until("a pending approval", _pending)
        yield session


def _pending(snapshot: Any) -> AgentInterrupt | None:
    return next(iter(snapshot.pending_interrupts), None)


def _wrong(value: object) -> Any:
    """``value`` typed ``Any``, so a deliberately wrong argument passes the type checker."""
    return value


WRONG_TYPES: list[tuple[str, Call, str]] = [
    # The bug report: a string "false" used to approve the write.
    (
        "approved='false'",
        lambda s: s.resolve_interrupt("s1", "call-1", approved=_wrong("false")),
        "resolve_interrupt: approved must be a bool, not str ('false')",
    ),
    (
        "approved=0",
        lambda s: s.resolve_interrupt("s1", "call-1", approved=_wrong(0)),
        "resolve_interrupt: approved must be a bool, not int (0)",
    ),
    (
        "approved=None",
        lambda s: s.resolve_interrupt("s1", "call-1", approved=_wrong(None)),
        "resolve_interrupt: approved must be a bool, not None",
    ),
    (
        "interrupt_id=1",
        lambda s: s.resolve_interrupt("s1", _wrong(1), approved=True),
        "resolve_interrupt: interrupt_id must be a str, not int (1)",
    ),
    (
        "rejection_message=5",
        lambda s: s.resolve_interrupt("s1", "call-1", False, _wrong(5)),
        "resolve_interrupt: rejection_message must be a str or None, not int (5)",
    ),
    # It used to queue the text "None".
    (
        "text=None",
        lambda s: s.send_user_message("s1", _wrong(None)),
        "send_user_message: text must be a str, not None",
    ),
    (
        "text=42",
        lambda s: s.send_user_message("s1", _wrong(42)),
        "send_user_message: text must be a str, not int (42)",
    ),
    (
        "send plan_mode='no'",
        lambda s: s.send_user_message("s1", "hi", plan_mode=_wrong("no")),
        "send_user_message: plan_mode must be a bool, not str ('no')",
    ),
    (
        "steer text=5",
        lambda s: s.steer_user_message("s1", text=_wrong(5)),
        "steer_user_message: text must be a str or None, not int (5)",
    ),
    (
        "steer message_id=7",
        lambda s: s.steer_user_message("s1", message_id=_wrong(7)),
        "steer_user_message: message_id must be a str or None, not int (7)",
    ),
    (
        "steer plan_mode='no'",
        lambda s: s.steer_user_message("s1", text="x", plan_mode=_wrong("no")),
        "steer_user_message: plan_mode must be a bool, not str ('no')",
    ),
    (
        "delete message_id=None",
        lambda s: s.delete_queued_message("s1", _wrong(None)),
        "delete_queued_message: message_id must be a str, not None",
    ),
    (
        "cancel turn_id=1",
        lambda s: s.cancel_turn("s1", _wrong(1)),
        "cancel_turn: turn_id must be a str, not int (1)",
    ),
    (
        "revision='1'",
        lambda s: s.execute_plan("s1", _wrong("1")),
        "execute_plan: revision must be an int, not str ('1')",
    ),
    (
        "revision=True",
        lambda s: s.execute_plan("s1", _wrong(True)),
        "execute_plan: revision must be an int, not bool (True)",
    ),
    (
        "revision=1.0",
        lambda s: s.execute_plan("s1", _wrong(1.0)),
        "execute_plan: revision must be an int, not float (1.0)",
    ),
    (
        "answer=5",
        lambda s: s.answer_question("s1", "call-1", _wrong(5)),
        "answer_question: answer must be a str, not int (5)",
    ),
    (
        "answer interrupt_id=None",
        lambda s: s.answer_question("s1", _wrong(None), "yes"),
        "answer_question: interrupt_id must be a str, not None",
    ),
    (
        "limit='5'",
        lambda s: s.list_agent_messages("s1", limit=_wrong("5")),
        "list_agent_messages: limit must be an int, not str ('5')",
    ),
    (
        "limit=1.9",
        lambda s: s.list_agent_messages("s1", limit=_wrong(1.9)),
        "list_agent_messages: limit must be an int, not float (1.9)",
    ),
    (
        "limit=True",
        lambda s: s.list_agent_messages("s1", limit=_wrong(True)),
        "list_agent_messages: limit must be an int, not bool (True)",
    ),
    (
        "before_sequence='3'",
        lambda s: s.list_agent_messages("s1", before_sequence=_wrong("3")),
        "list_agent_messages: before_sequence must be an int or None, not str ('3')",
    ),
    (
        "after_sequence=2.0",
        lambda s: s.list_agent_messages("s1", after_sequence=_wrong(2.0)),
        "list_agent_messages: after_sequence must be an int or None, not float (2.0)",
    ),
    (
        "snapshot session_id=123",
        lambda s: s.get_agent_snapshot(_wrong(123)),
        "get_agent_snapshot: session_id must be a str, not int (123)",
    ),
    (
        "settings session_id=None",
        lambda s: s.update_session_settings(_wrong(None), {}),
        "update_session_settings: session_id must be a str, not None",
    ),
    # It used to fail with "argument of type 'int' is not iterable".
    (
        "start session_id=123",
        lambda s: s.start_session(_wrong(123), "hi"),
        "start_session: session_id must be a str, not int (123)",
    ),
    (
        "start initial_message=None",
        lambda s: s.start_session("s2", _wrong(None)),
        "start_session: initial_message must be a str, not None",
    ),
    (
        "start plan_mode='no'",
        lambda s: s.start_session("s2", "hi", plan_mode=_wrong("no")),
        "start_session: plan_mode must be a bool, not str ('no')",
    ),
    (
        "start_environment PORT=8080",
        lambda s: s.start_session("s2", "hi", start_environment=_wrong({"PORT": 8080})),
        "start_session: start_environment['PORT'] must be a str, not int (8080)",
    ),
    # open_session starts through start_session, whose name these used to give.
    (
        "open plan_mode='yes'",
        lambda s: s.open_session("s2", plan_mode=_wrong("yes")),
        "open_session: plan_mode must be a bool, not str ('yes')",
    ),
    (
        "open start_environment PORT=8080",
        lambda s: s.open_session("s2", start_environment=_wrong({"PORT": 8080})),
        "open_session: start_environment['PORT'] must be a str, not int (8080)",
    ),
    (
        "open start_environment list",
        lambda s: s.open_session("s2", start_environment=_wrong([("PORT", "8080")])),
        "open_session: start_environment must be a mapping of str to str, "
        "not list ([('PORT', '8080')])",
    ),
    (
        "open session_id=b's2'",
        lambda s: s.open_session(_wrong(b"s2")),
        "open_session: session_id must be a str, not bytes (b's2')",
    ),
]


BAD_SESSION_IDS: list[tuple[str, Call, str]] = [
    ("start a/b", lambda s: s.start_session("a/b", "hi"), "it contains '/'"),
    ("start empty", lambda s: s.start_session("", "hi"), "it is empty"),
    ("start blank", lambda s: s.start_session("  ", "hi"), "it is blank"),
    ("start escape", lambda s: s.start_session("s\x1b[2J", "hi"), "control character U\\+001B"),
    (
        "start too long",
        lambda s: s.start_session("x" * (MAX_SESSION_ID_BYTES + 1), "hi"),
        "more than MAX_SESSION_ID_BYTES",
    ),
    ("send", lambda s: s.send_user_message("s1/x", "hi"), "it contains '/'"),
    ("steer", lambda s: s.steer_user_message("", text="hi"), "it is empty"),
    ("delete", lambda s: s.delete_queued_message("a\nb", "m"), "control character U\\+000A"),
    ("cancel", lambda s: s.cancel_turn(" ", "turn-1"), "it is blank"),
    ("execute", lambda s: s.execute_plan("a/b", 1), "it contains '/'"),
    (
        "resolve",
        lambda s: s.resolve_interrupt("s1\x00", "call-1", approved=True),
        "control character U\\+0000",
    ),
    ("answer", lambda s: s.answer_question("", "call-1", "yes"), "it is empty"),
    ("settings", lambda s: s.update_session_settings("a/b", {}), "it contains '/'"),
    ("snapshot", lambda s: s.get_agent_snapshot("\x7f"), "control character U\\+007F"),
    ("list", lambda s: s.list_agent_messages("a/b"), "it contains '/'"),
]


async def _assert_refused_and_nothing_changed(
    session: Session, call: Call, error: type[Exception], message: str
) -> None:
    before = await session.sessions.get_agent_snapshot("s1")
    flows_before = await session.client.list_flows()
    with pytest.raises(error, match=message):
        await call(session.sessions)
    assert await session.sessions.get_agent_snapshot("s1") == before
    assert await session.client.list_flows() == flows_before
    assert session.runner.tool_calls == []


@pytest.mark.parametrize(
    ("call", "message"),
    [pytest.param(call, message, id=name) for name, call, message in WRONG_TYPES],
)
async def test_a_wrong_typed_argument_is_refused_by_name_and_changes_nothing(
    awaiting_approval: Session, call: Call, message: str
) -> None:
    await _assert_refused_and_nothing_changed(
        awaiting_approval, call, TypeError, f"^{re.escape(message)}$"
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [pytest.param(call, message, id=name) for name, call, message in BAD_SESSION_IDS],
)
async def test_a_bad_session_id_is_refused_by_every_door_and_changes_nothing(
    awaiting_approval: Session, call: Call, message: str
) -> None:
    await _assert_refused_and_nothing_changed(
        awaiting_approval, call, InvalidSessionIdError, message
    )


async def test_the_refused_approval_is_still_pending_and_a_real_bool_resolves_it(
    awaiting_approval: Session,
) -> None:
    session = awaiting_approval
    with pytest.raises(TypeError, match="approved must be a bool"):
        await session.sessions.resolve_interrupt("s1", "call-1", approved=_wrong("false"))
    snapshot = await session.sessions.get_agent_snapshot("s1")
    assert [interrupt.interrupt_id for interrupt in snapshot.pending_interrupts] == ["call-1"]
    assert await session.sessions.resolve_interrupt(
        "s1", "call-1", approved=False, rejection_message="no"
    )
    snapshot = await session.idle()
    assert snapshot.messages[-1].text == "refund=no"
    assert session.runner.tool_calls == []


async def test_the_embedded_engine_refuses_a_raw_wrong_typed_rpc_input(
    awaiting_approval: Session,
) -> None:
    """Past the client, the engine's decode is strict too: nothing reaches the RPC handler."""
    session = awaiting_approval
    before = await session.sessions.get_agent_snapshot("s1")
    raw_inputs: list[Any] = [
        {"interrupt_id": "call-1", "approved": "false"},
        {"interrupt_id": "call-1", "approved": 1},
        ResolveInterruptRequest(interrupt_id="call-1", approved=_wrong("false")),
    ]
    for raw in raw_inputs:
        with pytest.raises(WireFormatError) as caught:
            await session.client.invoke_rpc(session.flow, "s1", "resolve_interrupt", raw)
        assert str(caught.value).startswith(
            "invalid ResolveInterruptRequest: approved: expected a bool, not "
        )
    with pytest.raises(WireFormatError, match="text: expected a str, not None"):
        await session.client.invoke_rpc(session.flow, "s1", "send_user_message", {"text": None})
    with pytest.raises(WireFormatError, match="expected a JSON object, not str"):
        await session.client.invoke_rpc(session.flow, "s1", "resolve_interrupt", "false")
    assert await session.sessions.get_agent_snapshot("s1") == before
    assert session.runner.tool_calls == []
