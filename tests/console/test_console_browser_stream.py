"""The console in a real Chromium: what the page makes of the session's event stream.

Each test takes the frames the server sends for a session and serves exactly
those to the page's ``EventSource``, then ends the stream; every snapshot after
the page's first is refused, so nothing but those events changes the page once
it shows the lost stream, and what it shows then is what the events made of it.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import Page, Route, expect

from dex_agents.console import create_console_app
from tests.console.agents import ACCOUNT_QUESTION, account_flow
from tests.console.browser import WAIT_MS, browser_page, needs_chromium
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot
from tests.ui_stream.sse import FrameReader, is_type

pytestmark = needs_chromium

LOST_STREAM = "Lost the session's live stream"


async def _frames_until(client: httpx.AsyncClient, session_id: str, last_type: str) -> str:
    """The frames the server sends from the session's snapshot token, up to a ``last_type`` event."""
    token = (await snapshot(client, session_id))["resume_token"]
    url = f"/api/sessions/{session_id}/events"
    async with client.stream("GET", url, params={"resume_token": token}) as response:
        frames = await FrameReader(response).until(is_type(last_type))
    return "".join(frame.raw for frame in frames)


async def _open_with_frames(page: Page, url: str, session_id: str, frames: str) -> None:
    """Open the session's page with ``frames`` as its whole stream; later snapshots answer 503."""
    snapshots = 0

    async def snapshot_route(route: Route) -> None:
        nonlocal snapshots
        snapshots += 1
        if snapshots == 1:
            await route.continue_()
        else:
            await route.fulfill(status=503, json={"ok": False, "reason": "held by the test"})

    async def events_route(route: Route) -> None:
        await route.fulfill(status=200, content_type="text/event-stream", body=frames)

    base = f"{url}/api/sessions/{session_id}"
    await page.route(f"{base}/snapshot", snapshot_route)
    await page.route(f"{base}/events?*", events_route)
    await page.goto(f"{url}/sessions/{session_id}")
    # EventSource reports the stream's end after it dispatched every event in it.
    await expect(page.locator("#notice")).to_contain_text(LOST_STREAM, timeout=WAIT_MS)


async def test_a_started_tool_that_asks_shows_its_wait_not_running(tmp_path: Path) -> None:
    # tool_call_started marks the call running; its question must end that, or the page shows
    # the call running for as long as it waits for the person.
    app = create_console_app(tmp_path / "s.sqlite3", [account_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "charge-1", "message": "charge my account"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        await eventually(
            lambda: snapshot(client, "charge-1"),
            lambda body: bool(body["snapshot"]["pending_interrupts"]),
        )
        frames = await _frames_until(client, "charge-1", "interrupt_raised")
        assert "tool_call_started" in frames
        async with browser_page() as page:
            await _open_with_frames(page, url, "charge-1", frames)
            await expect(page.locator(".card.attention")).to_contain_text(ACCOUNT_QUESTION)
            await expect(page.locator("[data-tool-status]")).to_have_text("awaiting_answer")
