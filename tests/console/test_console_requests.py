"""The console's answers to odd requests and odd text: wrong field types, framing, HEAD,
unusual tokens, a tool's text that is not valid Unicode."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from dex_agents.cli.database import demo_flow
from dex_agents.cli.serve import console_url
from dex_agents.console import TOKEN_ENV, create_console_app, load_console_token
from dex_agents.console.security import ConsoleConfigError
from dex_agents.local import LocalRuntime
from tests.console.agents import UNDECODABLE_FILE, file_flow
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot, texts


async def test_starting_a_session_refuses_wrong_types_and_ids_no_url_can_name(
    tmp_path: Path,
) -> None:
    # 0 or false used to read as "no ID" and started a session under a random one.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        cases = [
            ({"session_id": 0}, "session_id must be a string"),
            ({"session_id": False}, "session_id must be a string"),
            ({"flow_type": False}, "flow_type must be a string"),
            ({"message": 7}, "message must be a string"),
            ({"session_id": ".."}, "cannot show a session named '..'"),
            ({"session_id": "."}, "cannot show a session named '.'"),
        ]
        for body, reason in cases:
            answer = await client.post("/api/sessions", json=body, headers=CONTROL_HEADERS)
            assert answer.status_code == 400, body
            assert reason in answer.json()["reason"], body
        assert (await client.get("/api/sessions")).json()["sessions"] == []
        for raw in (b"{", b"[" * 100_000):  # the second nested past the parser's depth: 500
            answer = await client.post("/api/sessions", content=raw, headers=CONTROL_HEADERS)
            assert answer.status_code == 400, raw[:8]
            assert answer.json()["reason"] == "the body is not JSON"
        blank = await client.post(
            "/api/sessions", json={"session_id": "", "message": None}, headers=CONTROL_HEADERS
        )
        assert blank.json()["session_id"].startswith("console-")


async def test_the_printed_url_opens_the_console_whatever_the_tokens_characters(
    tmp_path: Path,
) -> None:
    token = "a+b&c=d#e %f"
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], token=token)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        port = int(url.rsplit(":", 1)[1])
        opened = await client.get(console_url("127.0.0.1", port, token), follow_redirects=True)
        assert opened.status_code == 200, opened.text
        assert (await client.get("/api/sessions")).status_code == 200


async def test_the_page_refuses_to_be_framed_by_another_site(tmp_path: Path) -> None:
    # Without a token, a page on any site could frame the loopback console and trick a click
    # on Approve: the same-origin request the click sends passes every other check.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        for path in ("/", "/sessions/refund"):
            page = await client.get(path)
            assert page.status_code == 200
            assert page.headers["x-frame-options"] == "DENY"
            assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
            assert page.headers["x-content-type-options"] == "nosniff"


def test_a_token_that_cannot_travel_in_a_header_is_refused_at_start(tmp_path: Path) -> None:
    # A check mark made the page answer 500 as it set the cookie; a UTF-8 token never matched
    # as a bearer token (headers arrive as Latin-1).
    for token in ("t\u2713k", "t\u00f6k", "tab\there"):
        with pytest.raises(ConsoleConfigError, match="printable ASCII"):
            create_console_app(tmp_path / "s.sqlite3", [demo_flow()], token=token)
        with pytest.raises(ConsoleConfigError, match="printable ASCII"):
            load_console_token(None, {TOKEN_ENV: token})
    with pytest.raises(ConsoleConfigError, match="empty"):
        create_console_app(tmp_path / "s.sqlite3", [demo_flow()], token="")


@pytest.mark.parametrize(
    "path",
    [
        "/api/sessions/s/events",
        # The streams of the pages of one browser, on one connection.
        "/api/events?streams=" + quote(json.dumps({"page": {"session_id": "s"}})),
    ],
    ids=["session", "shared"],
)
async def test_head_on_the_event_stream_answers_without_holding_the_connection(
    tmp_path: Path, path: str
) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    # The timeout is a guard: the old code never finished the HEAD response, so the next
    # request on the same keep-alive connection waited until the server stopped.
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        await client.post("/api/sessions", json={"session_id": "s"}, headers=CONTROL_HEADERS)
        head = await client.head(path)
        assert head.status_code == 200
        assert head.headers["content-type"].startswith("text/event-stream")
        assert (await client.get("/api/sessions/s/snapshot")).status_code == 200


async def test_text_with_a_lone_surrogate_from_a_tool_is_served_escaped(tmp_path: Path) -> None:
    # A tool's question and result may name a file that is not UTF-8; the session keeps the
    # text, and the JSON routes answered 500, which no reload of the page ever got past.
    app = create_console_app(tmp_path / "s.sqlite3", [file_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "files", "message": "tidy up"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        asking = await eventually(
            lambda: client.get("/api/sessions/files/snapshot"),
            lambda response: (
                response.status_code != 200
                or bool(response.json()["snapshot"]["pending_interrupts"])
            ),
        )
        assert asking.status_code == 200, asking.text
        assert "\\udcff" in asking.text
        interrupt = asking.json()["snapshot"]["pending_interrupts"][0]
        assert interrupt["question"] == f"Delete {UNDECODABLE_FILE}?"
        inbox = await client.get("/api/sessions")
        assert inbox.status_code == 200, inbox.text
        assert inbox.json()["sessions"][0]["waits_for"] == f"question: Delete {UNDECODABLE_FILE}?"
        answer = {"interrupt_id": interrupt["interrupt_id"], "answer": "yes"}
        await client.post(
            "/api/sessions/files/controls/answer_question", json=answer, headers=CONTROL_HEADERS
        )
        done = await eventually(
            lambda: snapshot(client, "files"),
            lambda body: body["snapshot"]["state"]["active_turn_id"] is None,
        )
        assert f"done: deleted {UNDECODABLE_FILE}" in texts(done)


async def test_the_stream_of_a_stopped_session_replays_its_events_then_ends(
    tmp_path: Path,
) -> None:
    # It long-polled a Stream nobody writes to any more, for as long as its page stayed open.
    db = tmp_path / "s.sqlite3"
    app = create_console_app(db, [demo_flow()], poll_timeout=timedelta(milliseconds=200))
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "stopped", "message": "refund order 7"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        await eventually(
            lambda: snapshot(client, "stopped"),
            lambda body: bool(body["snapshot"]["pending_interrupts"]),
        )
        async with LocalRuntime(db, [demo_flow()], workers=0, create=False) as other:
            await other.flow_client.stop_flow("stopped", "stopped elsewhere")
        response = await client.get("/api/sessions/stopped/events")
        frames = response.text.split("\n\n")
        assert frames[-1] == ""
        assert frames[-2] == 'event: session_ended\ndata: {"status": "stopped"}'
        replayed = [json.loads(f.split("data: ", 1)[1])["type"] for f in frames if "id: " in f]
        assert replayed[0] == "turn_started"
        assert replayed[-1] == "interrupt_raised"
