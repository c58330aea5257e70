"""``GET /api/sessions/{id}/worker``: what the console's worker runs a session's turns with."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import pytest

from dex_agents.cli.database import demo_flow
from dex_agents.console import close_event_streams, create_console_app
from dex_agents.console.worker_setup import ToolServerSetup, WorkerSetup, shown_url
from dex_agents.local import LocalRuntime
from tests.console.serve_process import STOP_DEADLINE_SECONDS
from tests.console.support import CONTROL_HEADERS, serve_console


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://me:pw@models.example/v1", "https://<redacted>@models.example/v1"),
        ("https://tok@models.example", "https://<redacted>@models.example"),
        # Every query value: Google's key is ?key=, which names no credential.
        (
            "https://h.example/v1?key=abc&api-version=2",
            "https://h.example/v1?key=<redacted>&api-version=<redacted>",
        ),
        ("https://h.example/mcp?abc", "https://h.example/mcp?<redacted>"),
        ("https://h.example/mcp#access_token=abc", "https://h.example/mcp"),
        ("http://h.example:port/", "<redacted>"),
        # A hosted MCP server's key is a part of its path; words and versions are kept.
        (
            "https://mcp.example/api/mcp/s/ZjE2YTk3OGEtNzc1Ni00ZjUx/mcp",
            "https://mcp.example/api/mcp/s/<redacted>/mcp",
        ),
        ("https://h.example/mcp/sk-proj-4fQz9", "https://h.example/mcp/<redacted>"),
        ("https://h.example/@team/notes/mcp", "https://h.example/@team/notes/mcp"),
        ("https://h.example/v1beta/openai/", "https://h.example/v1beta/openai/"),
        ("https://h.example/v1;key=abc/x", "https://h.example/<redacted>/x"),
        # No host: urllib reads "key" as the scheme and the rest as a path.
        ("key:abc@h.example:4000", "<redacted>"),
    ],
)
def test_a_url_is_shown_without_its_credentials(url: str, shown: str) -> None:
    assert shown_url(url) == shown
    assert WorkerSetup(model="m", model_server=url).model_server == shown
    assert ToolServerSetup(name="s", url=url).url == shown


async def _setup(flow_type: str) -> WorkerSetup:
    return WorkerSetup(
        model="openai/gpt-5-mini",
        model_server="https://me:pw@models.example/v1?api_key=k",
        tool_servers=[
            ToolServerSetup(name="notes", tools=["notes__read"]),
            ToolServerSetup(name="slow", url="http://127.0.0.1:9/mcp"),
        ],
    )


async def test_a_running_session_of_a_served_flow_type_says_what_its_turns_run_with(
    tmp_path: Path,
) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], worker_setup=_setup)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        started = await client.post(
            "/api/sessions", json={"session_id": "s"}, headers=CONTROL_HEADERS
        )
        assert started.json()["ok"] is True
        answer = await client.get("/api/sessions/s/worker")
        assert answer.json() == {
            "worker": {
                "model": "openai/gpt-5-mini",
                "model_server": "https://<redacted>@models.example/v1?api_key=<redacted>",
                "tool_servers": [
                    {"name": "notes", "url": None, "tools": ["notes__read"]},
                    {"name": "slow", "url": "http://127.0.0.1:9/mcp", "tools": None},
                ],
            }
        }
        assert (await client.get("/api/sessions/missing/worker")).status_code == 404
        # A session that ended runs no more turns, here or anywhere.
        async with LocalRuntime(
            tmp_path / "s.sqlite3", [demo_flow()], workers=0, create=False
        ) as other:
            await other.flow_client.stop_flow("s", "stopped in another window")
        assert (await client.get("/api/sessions/s/worker")).json() == {"worker": None}


async def test_a_session_the_console_does_not_run_names_no_model(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    flow = demo_flow()
    async with LocalRuntime(db, [flow]) as runtime:
        await runtime.sessions(flow).start_session("theirs", "")
    # A console that does not serve the Flow type: its worker never runs these turns.
    app = create_console_app(db, [], worker_setup=_setup)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.get("/api/sessions/theirs/worker")
        assert answer.json() == {"worker": None}
    # A console told nothing says nothing.
    app = create_console_app(db, [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/api/sessions/theirs/worker")).json() == {"worker": None}
    # A console with no worker of its own (workers=0) steers sessions other processes run:
    # the card said "Turns this console's worker runs use m" of turns it never runs.
    app = create_console_app(db, [demo_flow()], workers=0, worker_setup=_setup)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/api/sessions/theirs/worker")).json() == {"worker": None}


async def test_a_page_waiting_for_the_worker_setup_is_answered_503_when_the_console_stops(
    tmp_path: Path,
) -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()

    async def listing_forever(flow_type: str) -> WorkerSetup:
        entered.set()
        try:
            await asyncio.Event().wait()  # a first MCP listing of a server that never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("never set")

    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], worker_setup=listing_forever)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        started = await client.post(
            "/api/sessions", json={"session_id": "s"}, headers=CONTROL_HEADERS
        )
        assert started.json()["ok"] is True
        asked = asyncio.create_task(client.get("/api/sessions/s/worker"))
        await entered.wait()
        close_event_streams(app)
        # Before, the request waited for the hook, and uvicorn, stopping, for the request:
        # serve's Ctrl-C waited out the page's wait for the listing.
        answer = await asyncio.wait_for(asked, STOP_DEADLINE_SECONDS)
        assert answer.status_code == 503
        assert cancelled.is_set()


async def test_a_failing_worker_setup_hook_is_named_without_its_text_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def failing(flow_type: str) -> WorkerSetup:
        raise RuntimeError("cannot reach https://me:hunter2@models.example")

    async def wrong(flow_type: str) -> WorkerSetup:
        return {"model": "m"}  # type: ignore[return-value]  # an application's mistake

    db = tmp_path / "s.sqlite3"
    caplog.set_level(logging.ERROR, logger="dex_agents.console")
    app = create_console_app(db, [demo_flow()], worker_setup=failing)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        started = await client.post(
            "/api/sessions", json={"session_id": "s"}, headers=CONTROL_HEADERS
        )
        assert started.json()["ok"] is True
        # Before, a bare "Internal Server Error" that named nothing, logged by uvicorn each time.
        for _ in range(3):
            answer = await client.get("/api/sessions/s/worker")
            assert answer.status_code == 500
            assert answer.json() == {
                "ok": False,
                "reason": "what the worker runs DemoSupportAgent turns with could not be read: "
                "the console's worker_setup hook raised RuntimeError (see the console's log)",
            }
        # The rest of the session's routes answer as ever.
        assert (await client.get("/api/sessions/s/snapshot")).status_code == 200
    logged = [r for r in caplog.records if r.name.startswith("dex_agents.console")]
    assert len(logged) == 1
    assert "hunter2" in logged[0].getMessage()  # the log has it all; the page, none of it
    app = create_console_app(db, [demo_flow()], worker_setup=wrong)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.get("/api/sessions/s/worker")
        assert answer.status_code == 500
        assert "worker_setup hook returned a dict" in answer.json()["reason"]
