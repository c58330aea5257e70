"""The console's JSON API over uvicorn on loopback: inbox, controls, refusals, token and CSRF."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sqlite3
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from dex_agents.adapters.local.database_file import DatabaseFileError
from dex_agents.adapters.local.probes import wait_until
from dex_agents.builtin_loop import builtin_agent_session_flow
from dex_agents.cli.database import demo_flow
from dex_agents.cli.demo_agent import build_demo_agent
from dex_agents.cli.errors import CliError
from dex_agents.cli.main import main
from dex_agents.cli.serve import console_url, run_serve
from dex_agents.console import (
    TOKEN_ENV,
    close_event_streams,
    create_console_app,
    load_console_token,
)
from dex_agents.console.security import cross_site_refusal, host_header_name, is_loopback_host
from dex_agents.domain.state import AgentSessionStartInput
from dex_agents.local import LocalRuntime
from tests.console.serve_process import ROOT
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot, texts
from tests.support.retry_intervals import retrying_runtime

OTHER_FLOW_TYPE = "SomeoneElsesAgent"


async def test_approve_from_the_api_and_the_tools_result_appears(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        started = await client.post(
            "/api/sessions",
            json={"session_id": "refund", "message": "refund order 7 $5"},
            headers=CONTROL_HEADERS,
        )
        assert started.json() == {"ok": True, "reason": None, "session_id": "refund"}
        body = await eventually(
            lambda: snapshot(client, "refund"), lambda b: bool(b["snapshot"]["pending_interrupts"])
        )
        assert body["console"]["writable"] is True
        inbox = (await client.get("/api/sessions")).json()
        assert inbox["flow_types"] == ["DemoSupportAgent"]
        row = inbox["sessions"][0]
        assert row["session_id"] == "refund"
        assert row["attention"] == "approval"
        assert row["needs_person"] is True
        assert row["waits_for"] == "approval of refund_order"
        interrupt_id = body["snapshot"]["pending_interrupts"][0]["interrupt_id"]
        misspelt = await client.post(
            "/api/sessions/refund/controls/resolve_interrupt",
            json={"interrupt_id": interrupt_id, "approve": True},
            headers=CONTROL_HEADERS,
        )
        assert misspelt.status_code == 400  # no decision is no rejection
        assert misspelt.json() == {"ok": False, "reason": "approved is required: true or false"}
        still = await snapshot(client, "refund")
        assert [i["interrupt_id"] for i in still["snapshot"]["pending_interrupts"]] == [
            interrupt_id
        ]
        decision = {"interrupt_id": interrupt_id, "approved": True}
        approved = await client.post(
            "/api/sessions/refund/controls/resolve_interrupt",
            json=decision,
            headers=CONTROL_HEADERS,
        )
        assert approved.json() == {"ok": True, "reason": None}
        done = await eventually(
            lambda: snapshot(client, "refund"),
            lambda b: (
                "refunded 500 cents on order 7" in texts(b)
                and b["snapshot"]["state"]["active_turn_id"] is None
            ),
        )
        assert "framework_item" not in done["snapshot"]["messages"][0]
        again = await client.post(
            "/api/sessions/refund/controls/resolve_interrupt",
            json=decision,
            headers=CONTROL_HEADERS,
        )
        assert again.status_code == 200
        assert again.json()["ok"] is False
        assert "already answered" in again.json()["reason"]
        inbox = (await client.get("/api/sessions")).json()
        assert inbox["sessions"][0]["attention"] == "idle"


async def test_false_answers_name_their_reason(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await client.post("/api/sessions", json={"session_id": "s"}, headers=CONTROL_HEADERS)
        duplicate = await client.post(
            "/api/sessions", json={"session_id": "s"}, headers=CONTROL_HEADERS
        )
        assert duplicate.json()["ok"] is False
        assert "exists already" in duplicate.json()["reason"]
        cases = {
            "delete_queued_message": ({"message_id": "gone"}, "no longer queued"),
            "cancel_turn": ({"turn_id": "turn-9"}, "no longer active"),
            "answer_question": ({"interrupt_id": "q", "answer": "x"}, "already answered"),
            "execute_plan": ({"revision": 3}, "cannot run now"),
            "send_user_message": ({"text": "   "}, "did not accept"),
            # The demo agent has plan mode off, and the composer's plan mode box can be ticked.
            "steer_user_message": ({"text": "go", "plan_mode": True}, "plan mode is off"),
        }
        for name, (payload, reason) in cases.items():
            response = await client.post(
                f"/api/sessions/s/controls/{name}", json=payload, headers=CONTROL_HEADERS
            )
            assert response.status_code == 200, name
            assert response.json()["ok"] is False, name
            assert reason in response.json()["reason"], name
        wrong = await client.post(
            "/api/sessions/s/controls/resolve_interrupt",
            json={"interrupt_id": "q", "approved": "false"},
            headers=CONTROL_HEADERS,
        )
        assert wrong.status_code == 400
        missing = await client.get("/api/sessions/nobody/snapshot")
        assert missing.status_code == 404


async def test_cross_site_requests_are_refused(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        body = {"session_id": "x", "message": "hi"}
        refused = [
            await client.post("/api/sessions", json=body),
            await client.post(
                "/api/sessions",
                json=body,
                headers={**CONTROL_HEADERS, "Origin": "https://evil.example"},
            ),
            await client.post(
                "/api/sessions",
                json=body,
                headers={**CONTROL_HEADERS, "Sec-Fetch-Site": "cross-site"},
            ),
        ]
        assert [response.status_code for response in refused] == [403, 403, 403]
        assert (await client.get("/api/sessions")).json()["sessions"] == []
        same_origin = {**CONTROL_HEADERS, "Origin": url, "Sec-Fetch-Site": "same-origin"}
        accepted = await client.post("/api/sessions", json=body, headers=same_origin)
        assert accepted.json()["ok"] is True


async def test_without_a_token_only_loopback_host_names_are_answered(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        rebound = await client.get("/api/sessions", headers={"Host": "attacker.example:80"})
        assert rebound.status_code == 403
        page = await client.get("/", headers={"Host": "localhost"})
        assert page.status_code == 200
        assert "console.js" in page.text


async def test_a_token_is_required_on_every_request(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], token="s3cret-token")
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/api/sessions")).status_code == 401
        assert (await client.get("/")).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert (await client.get("/api/sessions", headers=wrong)).status_code == 401
        bearer = {"Authorization": "Bearer s3cret-token"}
        assert (await client.get("/api/sessions", headers=bearer)).status_code == 200
        login = await client.get("/?token=s3cret-token")
        assert login.status_code == 303
        assert "httponly" in login.headers["set-cookie"].lower()
        # The client keeps the cookie: the page and the API answer now, even from another Host.
        assert (await client.get("/")).status_code == 200
        remote = await client.get("/api/sessions", headers={"Host": "console.example"})
        assert remote.status_code == 200


async def test_serve_refuses_a_non_loopback_host_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(CliError, match="not loopback"):
        await run_serve(tmp_path / "s.sqlite3", "0.0.0.0", 0)
    assert not (tmp_path / "s.sqlite3").exists()
    empty = tmp_path / "token"
    empty.write_text("\n")
    with pytest.raises(CliError, match="empty"):
        await run_serve(tmp_path / "s.sqlite3", "0.0.0.0", 0, token_file=empty)


async def test_serve_names_a_bad_database_or_port_before_it_prints_its_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One line each, as chat gives, not a server's traceback after the console's URL.
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("hello")
    with pytest.raises(DatabaseFileError, match="not a session database"):
        await run_serve(not_a_database, "127.0.0.1", 0)
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        with pytest.raises(CliError, match=r"cannot listen on 127\.0\.0\.1:"):
            await run_serve(tmp_path / "s.sqlite3", "127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()
    assert "dex-agents console:" not in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--port", "99999"])
    assert "'99999' is not a port (0 to 65535)" in capsys.readouterr().err


async def test_serve_names_a_token_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(CliError) as missing:
        await run_serve(tmp_path / "s.sqlite3", "0.0.0.0", 0, token_file=tmp_path / "nope")
    assert str(missing.value) == (
        f"the token file {tmp_path / 'nope'} cannot be read: No such file or directory"
    )
    latin = tmp_path / "latin"
    latin.write_bytes(b"caf\xe9")
    with pytest.raises(CliError) as undecodable:
        await run_serve(tmp_path / "s.sqlite3", "0.0.0.0", 0, token_file=latin)
    assert str(undecodable.value) == f"the token file {latin} cannot be read: it is not UTF-8 text"


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, *flags: str) -> AsyncIterator[str]:
    """``dex-agents serve --port 0`` with ``flags``; yields the URL it prints, stopped after."""
    serve = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dex_agents.cli",
        "serve",
        "--db",
        str(tmp_path / "s.sqlite3"),
        "--port",
        "0",
        *flags,
        cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert serve.stderr is not None
    try:
        line = await asyncio.wait_for(serve.stderr.readline(), 60)
        url = line.decode().removeprefix("dex-agents console: ").strip()
        assert url.startswith("http://127.0.0.1:"), line
        yield url
    finally:
        serve.send_signal(signal.SIGINT)
        await asyncio.wait_for(serve.wait(), 60)


async def test_serve_on_port_0_prints_the_port_it_listens_on(tmp_path: Path) -> None:
    async with serving(tmp_path) as url:
        assert not url.endswith(":0")
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/api/sessions")).status_code == 200


@pytest.mark.skipif(not socket.has_dualstack_ipv6(), reason="no dual-stack IPv6 sockets here")
async def test_serve_on_every_ipv6_address_answers_at_the_url_it_prints(tmp_path: Path) -> None:
    # Bound IPv6-only, "--host ::" printed http://127.0.0.1:PORT, which refused connections.
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    flags = ("--host", "::", "--token-file", str(token_file))
    async with serving(tmp_path, *flags) as url, httpx.AsyncClient() as client:
        assert (await client.get(url)).status_code == 303
    assert console_url("[::]", 8765, None) == "http://127.0.0.1:8765"


def test_token_sources_and_host_rules(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    assert load_console_token(token_file, {TOKEN_ENV: "from-env"}) == "from-file"
    assert load_console_token(None, {TOKEN_ENV: " from-env "}) == "from-env"
    assert load_console_token(None, {}) is None
    assert [is_loopback_host(h) for h in ("127.0.0.1", "localhost", "[::1]", "::1")] == [True] * 4
    assert [is_loopback_host(h) for h in ("0.0.0.0", "10.0.0.2", "example.com")] == [False] * 3
    assert host_header_name("localhost:8765") == "localhost"
    assert host_header_name("[::1]:8765") == "[::1]"
    own = "http://127.0.0.1:1"
    assert cross_site_refusal({"x-dex-agents-console": "1"}, own) is None
    assert cross_site_refusal({}, own) is not None


async def test_sessions_of_other_flow_types_are_read_only(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    other = builtin_agent_session_flow(build_demo_agent(), flow_type=OTHER_FLOW_TYPE)
    async with LocalRuntime(db, [other], workers=1, create=True) as runtime:
        sessions = runtime.sessions(other)
        await sessions.start_session("theirs", "where is order 7")
        await sessions.wait_for_user("theirs")
    app = create_console_app(db, [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        inbox = (await client.get("/api/sessions")).json()
        assert inbox["flow_types"] == ["DemoSupportAgent"]
        (row,) = inbox["sessions"]
        assert (row["flow_type"], row["writable"], row["attention"]) == (
            OTHER_FLOW_TYPE,
            False,
            "idle",
        )
        body = await snapshot(client, "theirs")
        assert body["console"]["writable"] is False
        assert "lookup_order" in [m["tool_name"] for m in body["snapshot"]["messages"]]
        refused = await client.post(
            "/api/sessions/theirs/controls/send_user_message",
            json={"text": "hi"},
            headers=CONTROL_HEADERS,
        )
        assert refused.status_code == 403
        assert "read-only" in refused.json()["reason"]


async def test_the_event_stream_serves_the_sessions_events(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await client.post(
            "/api/sessions",
            json={"session_id": "e", "message": "refund order 7"},
            headers=CONTROL_HEADERS,
        )
        await eventually(
            lambda: snapshot(client, "e"), lambda b: bool(b["snapshot"]["pending_interrupts"])
        )
        async with client.stream("GET", "/api/sessions/e/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            seen = ""
            async for chunk in response.aiter_text():
                seen += chunk
                if "interrupt_raised" in seen:
                    break
        assert "turn_started" in seen
        bad = await client.get("/api/sessions/e/events", params={"resume_token": "not-a-token"})
        assert bad.status_code == 400


async def test_authorize_hides_and_refuses_sessions(tmp_path: Path) -> None:
    starting = True

    async def only_mine(request: object, session_id: str) -> bool:
        return starting or session_id.startswith("mine-")

    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], authorize=only_mine)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        for session_id in ("mine-1", "yours-1"):
            await client.post(
                "/api/sessions", json={"session_id": session_id}, headers=CONTROL_HEADERS
            )
        starting = False
        inbox = (await client.get("/api/sessions")).json()
        assert [row["session_id"] for row in inbox["sessions"]] == ["mine-1"]
        assert (await client.get("/api/sessions/yours-1/snapshot")).status_code == 403


async def test_close_event_streams_ends_open_streams_and_refuses_new_ones(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await client.post(
            "/api/sessions",
            json={"session_id": "s", "message": "where is order 7"},
            headers=CONTROL_HEADERS,
        )
        async with client.stream("GET", "/api/sessions/s/events") as response:
            chunks = response.aiter_text()
            assert await anext(chunks)  # a frame or a keep-alive: the stream is open
            close_event_streams(app)
            # It ends now: otherwise the stream's 15-second long polls would hold it open.
            async with asyncio.timeout(5):
                async for _ in chunks:
                    pass
        refused = await client.get("/api/sessions/s/events")
        assert refused.status_code == 503


async def test_the_inbox_shows_what_another_process_wrote_since_the_last_request(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.sqlite3"
    app = create_console_app(db, [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await client.post("/api/sessions", json={"session_id": "first"}, headers=CONTROL_HEADERS)
        listed = await client.get("/api/sessions")
        assert [row["session_id"] for row in listed.json()["sessions"]] == ["first"]
        # Another runtime on the file stands for another process: its commit is the only
        # change, and the console's worker runs the session it starts.
        flow = demo_flow()
        async with LocalRuntime(db, [flow], workers=0, create=False) as other:
            await other.sessions(flow).start_session("second", "refund order 8 $2")
        body = await eventually(
            lambda: client.get("/api/sessions"),
            lambda response: (
                len(response.json()["sessions"]) == 2
                and response.json()["sessions"][0]["attention"] == "approval"
            ),
        )
        assert body.json()["sessions"][0]["session_id"] == "second"


async def test_a_session_the_session_rules_refuse_gets_409_from_every_route(
    tmp_path: Path,
) -> None:
    # Another program can start one through the engine (300 bytes is past the session rules).
    path, session_id = tmp_path / "s.sqlite3", "x" * 300
    flow = demo_flow()
    async with LocalRuntime(path, [flow], workers=0) as runtime:
        await runtime.flow_client.start_flow(flow, session_id, AgentSessionStartInput())
    app = create_console_app(path, [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        for route in ("snapshot", "events", "messages"):
            answer = await client.get(f"/api/sessions/{session_id}/{route}")
            assert answer.status_code == 409, (route, answer.text)
            assert "invalid session ID" in answer.json()["reason"]


async def test_a_body_without_a_length_is_refused_once_it_passes_the_limit(
    tmp_path: Path,
) -> None:
    # Sent in chunks, with no Content-Length to refuse it by: counted as it arrives.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"message": "'
        for _ in range(64):
            yield b"x" * 8192
        yield b'"}'

    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.post("/api/sessions", content=chunks(), headers=CONTROL_HEADERS)
    assert answer.status_code == 413
    assert answer.json() == {"ok": False, "reason": "request too large"}


async def test_a_body_declared_too_large_is_refused_before_it_is_read(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        # A gigabyte declared and two bytes sent: the answer must not wait for the rest.
        writer.write(
            f"POST /api/sessions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "X-Dex-Agents-Console: 1\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000000000\r\n\r\n{}".encode()
        )
        try:
            await writer.drain()
            async with asyncio.timeout(30):  # a guard: the old code waited for the gigabyte
                status = await reader.readline()
        finally:
            writer.close()
            await writer.wait_closed()
    assert status.split()[1] == b"413"


async def test_a_session_that_failed_on_damaged_state_says_why_on_its_page(
    tmp_path: Path,
) -> None:
    path, flow = tmp_path / "s.sqlite3", demo_flow()
    async with LocalRuntime(path, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        await runtime.sessions(flow).open_session("damaged")
        await runtime.sessions(flow).wait_for_user("damaged", timeout=timedelta(seconds=30))
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(
            "UPDATE attribute_values SET value = CAST(x'ff22' AS TEXT)"
            " WHERE flow_id = 'damaged' AND name = 'AgentState'"
        )
    async with retrying_runtime(path, [flow]) as runtime:
        assert await runtime.sessions(flow).send_user_message("damaged", "hello")

        async def failed() -> bool:
            info = await runtime.flow_client.describe_flow("damaged")
            return info.status == "failed"

        ended: bool = await wait_until("the damaged session's end", failed)
        assert ended
    app = create_console_app(path, [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.get("/api/sessions/damaged/snapshot")
        inbox = (await client.get("/api/sessions")).json()
    assert answer.status_code == 409
    reason = answer.json()["reason"]
    # Before, the page said only that the file was damaged, as if the session still ran.
    assert reason.startswith("this session is failed: Step AwaitUserMessage-")
    assert "Attribute 'AgentState'" in reason
    # Before, the inbox said only 'failed'; the cause, cut short, now follows it.
    assert [(row["session_id"], row["status"]) for row in inbox["sessions"]] == [
        ("damaged", "failed: UnreadableStateError: the state of AwaitUserMessage in Fl...")
    ]
