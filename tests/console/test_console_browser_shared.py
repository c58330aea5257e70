"""The event streams the session pages of one browser share (``static/stream_worker.js``) in a
real Chromium: more streams than one connection carries (by count and by URL), and a page
gone without pagehide."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from playwright.async_api import Page, expect
from starlette.requests import Request

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.console.shared_streams import MAX_SHARED_STREAMS
from tests.console.browser import WAIT_MS, browser_context, browser_page, browser_tests
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot

pytestmark = browser_tests

H11_HEAD_LIMIT = 16 * 1024
"""The longest request head uvicorn's h11 reads when it comes in pieces (its default)."""

OPEN_STREAMS = """async ([count, sessionId]) => {
  const { openEventStream } = await import("/static/event_streams.js");
  window.completed = Array(count).fill(false);
  window.failures = 0;
  for (let n = 0; n < count; n++) {
    const stream = openEventStream(`/api/sessions/${sessionId}`, sessionId, "");
    stream.onmessage = (message) => {
      if (JSON.parse(message.data).type === "turn_completed") window.completed[n] = true;
    };
    stream.onerror = () => { window.failures += 1; };
  }
}"""
"""Opens ``count`` streams of session ``sessionId`` in the page, as that many session pages would:
``window.completed[n]`` once stream ``n`` read the turn's end, ``window.failures`` counts errors."""

TELL_NOTHING_OF_LEAVING = """
for (const type of ["pagehide", "visibilitychange"]) {
  addEventListener(type, (event) => event.stopImmediatePropagation(), true);
}
"""
"""Keeps ``pagehide`` and ``visibilitychange`` from the page's own listeners, as a page whose
renderer crashed or was killed, or a frozen tab discarded, is told nothing as it goes."""


async def _reply_shown(page: Page, text: str) -> None:
    await expect(page.locator("#messages")).to_contain_text(f"Demo reply: {text}.", timeout=WAIT_MS)


async def _start(url: str, *session_ids: str) -> None:
    """Start each session with ``hello <ID>`` and wait for its turn's end."""
    async with httpx.AsyncClient(base_url=url) as client:
        for session_id in session_ids:
            start = {"session_id": session_id, "message": f"hello {session_id}"}
            answer = await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            assert answer.json()["ok"] is True
            await _turn_done(client, session_id)


async def _turn_done(client: httpx.AsyncClient, session_id: str) -> None:
    await eventually(
        lambda: snapshot(client, session_id),
        lambda body: (
            body["snapshot"]["state"]["turn_count"] == 1
            and body["snapshot"]["state"]["active_turn_id"] is None
        ),
    )


async def test_streams_past_what_one_shared_connection_carries_each_read_their_session(
    tmp_path: Path,
) -> None:
    # The console refuses a connection asking for more than MAX_SHARED_STREAMS streams, and
    # the worker put every stream on one: the 101st page's stream failed them all, and each
    # page's stream asked again every second, refused again.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_page() as page:
        await _start(url, "s")
        await page.goto(url + "/")
        await page.evaluate(OPEN_STREAMS, [MAX_SHARED_STREAMS + 1, "s"])
        every = "window.completed.every((done) => done)"
        await eventually(lambda: page.evaluate(every), lambda done: done is True)
        assert await page.evaluate("window.failures") == 0


async def test_the_streams_of_long_session_ids_go_on_connections_of_urls_the_server_reads(
    tmp_path: Path,
) -> None:
    # uvicorn's HTTP parser (h11) answers 400 to a request head past 16 KiB that comes in
    # pieces, as it may over a network; 100 streams of session IDs of 200 characters asked
    # for one connection of a 60 KB URL (read whole here, on loopback).
    session_id = "long-" + "x" * 195
    urls: list[int] = []

    async def authorize(request: Request, asked: str) -> bool:
        if request.url.path == "/api/events":
            urls.append(len(request.scope["raw_path"]) + len(request.scope["query_string"]))
        return True

    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], authorize=authorize)
    async with serve_console(app) as url, browser_page() as page:
        await _start(url, session_id)
        await page.goto(url + "/")
        await page.evaluate(OPEN_STREAMS, [MAX_SHARED_STREAMS, session_id])
        every = "window.completed.every((done) => done)"
        await eventually(lambda: page.evaluate(every), lambda done: done is True)
        assert await page.evaluate("window.failures") == 0
    assert max(urls) < H11_HEAD_LIMIT - 1024, max(urls)  # room for the request's headers


async def test_a_page_gone_without_pagehide_has_its_stream_dropped_from_the_shared_one(
    tmp_path: Path,
) -> None:
    asked: list[list[str]] = []  # the sessions of each /api/events request, as authorized

    async def authorize(request: Request, session_id: str) -> bool:
        if request.url.path == "/api/events":
            streams = json.loads(request.query_params["streams"]).values()
            asked.append(sorted(stream["session_id"] for stream in streams))
        return True

    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], authorize=authorize)
    async with serve_console(app) as url, browser_context() as context:
        await _start(url, "a", "b")
        gone = await context.new_page()
        await gone.add_init_script(TELL_NOTHING_OF_LEAVING)
        await gone.goto(f"{url}/sessions/a")
        await _reply_shown(gone, "hello a")
        kept = await context.new_page()
        await kept.goto(f"{url}/sessions/b")
        await _reply_shown(kept, "hello b")
        await eventually(lambda: _last(asked), lambda sessions: sessions == ["a", "b"])
        await gone.close()
        # Before, the worker learned of a page's end only from its pagehide: the stream of
        # a page gone without one stayed in the shared connection until the worker ended.
        await eventually(lambda: _last(asked), lambda sessions: sessions == ["b"])
        await _reply_shown(kept, "hello b")


async def _last(asked: list[list[str]]) -> list[str]:
    return asked[-1] if asked else []
