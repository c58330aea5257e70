"""The event streams the session pages of one browser share (``static/stream_worker.js``) in a
real Chromium: more streams than one connection carries."""

from __future__ import annotations

from pathlib import Path

import httpx

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.console.shared_streams import MAX_SHARED_STREAMS
from tests.console.browser import browser_page, browser_tests
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot

pytestmark = browser_tests

OPEN_STREAMS = """async (count) => {
  const { openEventStream } = await import("/static/event_streams.js");
  window.completed = Array(count).fill(false);
  window.failures = 0;
  for (let n = 0; n < count; n++) {
    const stream = openEventStream("/api/sessions/s", "s", "");
    stream.onmessage = (message) => {
      if (JSON.parse(message.data).type === "turn_completed") window.completed[n] = true;
    };
    stream.onerror = () => { window.failures += 1; };
  }
}"""
"""Opens ``count`` streams of session ``s`` in the page, as that many session pages would:
``window.completed[n]`` once stream ``n`` read the turn's end, ``window.failures`` counts errors."""


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
        await page.evaluate(OPEN_STREAMS, MAX_SHARED_STREAMS + 1)
        every = "window.completed.every((done) => done)"
        await eventually(lambda: page.evaluate(every), lambda done: done is True)
        assert await page.evaluate("window.failures") == 0
