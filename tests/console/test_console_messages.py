"""The console's messages route: pages of a session's stored messages by sequence, the
query it refuses, and the same token, loopback and ``authorize`` rules as every route."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.datastructures import QueryParams

from dex_agents.builtin_loop import builtin_agent_session_flow
from dex_agents.cli.demo_agent import build_demo_agent
from dex_agents.console import create_console_app
from dex_agents.console.messages import PageQueryError, messages_page_json, page_request
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.plans import executing_turn_user_message
from dex_agents.domain.requests import AgentMessagesPage, ListAgentMessagesRequest
from dex_agents.local import LocalRuntime
from tests.console.agents import echo_flow, echo_session
from tests.console.support import serve_console

TURNS = 5
"""A user message and an answer each: sequences 1 to 10."""


def _sequences(body: dict[str, Any]) -> list[int]:
    return [message["sequence"] for message in body["messages"]]


async def test_pages_go_back_by_sequence_as_list_agent_messages_does(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    await echo_session(db, "long", TURNS)
    app = create_console_app(db, [echo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        newest = await client.get("/api/sessions/long/messages")
        assert newest.status_code == 200, newest.text
        assert newest.headers["cache-control"] == "no-store"
        body = newest.json()
        assert _sequences(body) == list(range(1, 11))
        assert (body["has_more"], body["deleted_before_sequence"]) == (False, None)
        assert body["plan_approvals"] == {}
        # As the snapshot carries them: the framework's replay data stays on the server.
        assert all("framework_item" not in message for message in body["messages"])
        assert body["messages"][0]["text"] == "message 1"
        back = (await client.get("/api/sessions/long/messages?before_sequence=5&limit=2")).json()
        assert (_sequences(back), back["has_more"]) == ([3, 4], True)
        first = (await client.get("/api/sessions/long/messages?before_sequence=3&limit=2")).json()
        assert (_sequences(first), first["has_more"]) == ([1, 2], False)
        on = (await client.get("/api/sessions/long/messages?after_sequence=8")).json()
        assert (_sequences(on), on["has_more"]) == ([9, 10], False)


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("before_sequence=x", "before_sequence must be a whole number from 1 to"),
        ("before_sequence=-3", "before_sequence must be a whole number from 1 to"),
        ("before_sequence=0", "before_sequence must be a whole number from 1 to"),
        ("before_sequence=1.5", "before_sequence must be a whole number from 1 to"),
        ("before_sequence=%2B5", "before_sequence must be a whole number from 1 to"),
        ("before_sequence=", "before_sequence must be a whole number from 1 to"),
        ("before_sequence=99999999999999999999", "before_sequence must be a whole number"),
        ("after_sequence=-1", "after_sequence must be a whole number from 0 to"),
        ("limit=-1", "limit must be a whole number from 1 to 200, not '-1'"),
        ("limit=0", "limit must be a whole number from 1 to 200, not '0'"),
        ("limit=201", "limit must be a whole number from 1 to 200, not '201'"),
        ("limit=1000000000000000000000000", "limit must be a whole number from 1 to 200"),
        ("limit=1&limit=500", "limit is given 2 times"),
        ("before_sequence=5&after_sequence=1", "set before_sequence or after_sequence, not both"),
    ],
)
def test_a_query_the_route_refuses_names_what_is_wrong(query: str, reason: str) -> None:
    with pytest.raises(PageQueryError) as raised:
        page_request(QueryParams(query))
    assert reason in str(raised.value)


def test_a_refused_value_is_shown_cut_to_a_readable_length() -> None:
    with pytest.raises(PageQueryError) as raised:
        page_request(QueryParams({"limit": "9" * 5000}))
    assert len(str(raised.value)) < 120


def test_a_query_without_a_limit_asks_for_a_page_as_long_as_the_snapshot() -> None:
    assert page_request(QueryParams("")) == ListAgentMessagesRequest(limit=200)
    assert page_request(QueryParams("before_sequence=007&limit=3&token=t")) == (
        ListAgentMessagesRequest(before_sequence=7, limit=3)
    )


async def test_bad_input_is_answered_400_before_any_page_is_read(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    await echo_session(db, "long", 1)
    app = create_console_app(db, [echo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        for query, reason in [
            ("before_sequence=abc", "before_sequence must be a whole number"),
            ("limit=-5", "limit must be a whole number from 1 to 200"),
            ("limit=100000", "limit must be a whole number from 1 to 200"),
        ]:
            answer = await client.get(f"/api/sessions/long/messages?{query}")
            assert answer.status_code == 400, query
            assert answer.json()["ok"] is False
            assert reason in answer.json()["reason"], query


def test_a_page_says_which_of_its_messages_are_a_plans_approval() -> None:
    # An earlier page is drawn as the snapshot is: the session's approval message as the plan's.
    page = AgentMessagesPage(
        messages=(
            AgentMessage(sequence=3, turn_id="turn-2", role="user", framework_item="{}", text="x"),
            AgentMessage(
                sequence=4,
                turn_id="turn-3",
                role="user",
                framework_item="{}",
                text=executing_turn_user_message(2),
            ),
        ),
        has_more=True,
        deleted_before_sequence=3,
    )
    body = messages_page_json(page)
    assert body["plan_approvals"] == {"4": 2}
    assert (body["has_more"], body["deleted_before_sequence"]) == (True, 3)
    assert "framework_item" not in body["messages"][0]
    assert body["messages"][0]["text"] == "x"


async def test_the_route_is_under_the_token_loopback_and_authorize_rules(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    await echo_session(db, "mine-1", 1)
    await echo_session(db, "yours-1", 1)

    async def only_mine(request: object, session_id: str) -> bool:
        return session_id.startswith("mine-")

    app = create_console_app(db, [echo_flow()], authorize=only_mine)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/api/sessions/mine-1/messages")).status_code == 200
        refused = await client.get("/api/sessions/yours-1/messages?limit=-1")
        assert (refused.status_code, refused.json()["reason"]) == (403, "not allowed")
        rebound = await client.get(
            "/api/sessions/mine-1/messages", headers={"Host": "attacker.example:80"}
        )
        assert rebound.status_code == 403
        missing = await client.get("/api/sessions/mine-2/messages")
        assert (missing.status_code, missing.json()["reason"]) == (404, "no such session")
    with_token = create_console_app(db, [echo_flow()], token="s3cret-token")
    async with serve_console(with_token) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/api/sessions/mine-1/messages")).status_code == 401
        bearer = {"Authorization": "Bearer s3cret-token"}
        answer = await client.get("/api/sessions/mine-1/messages", headers=bearer)
        assert answer.status_code == 200


async def test_sessions_of_flow_types_the_console_does_not_run_page_too(tmp_path: Path) -> None:
    # Read through the viewer Flow, which runs no Step: paging is an RPC, no Step runs it.
    db = tmp_path / "s.sqlite3"
    other = builtin_agent_session_flow(build_demo_agent(), flow_type="SomeoneElsesAgent")
    async with LocalRuntime(db, [other], workers=1) as runtime:
        sessions = runtime.sessions(other)
        await sessions.start_session("theirs", "where is order 7")
        await sessions.wait_for_user("theirs")
    app = create_console_app(db, [echo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.get("/api/sessions/theirs/messages?limit=1")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert len(body["messages"]) == 1
        assert body["has_more"] is True
