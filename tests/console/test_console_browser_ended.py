"""The console in a real Chromium: the page of a session that no longer runs.

Its stream ends once it has sent every event the session wrote, and the page
opens no other. The page's timers run on Playwright's clock, so a minute of
them passes at once; a fetch of the page's own, answered after them, makes sure
every request they started has been seen.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from playwright.async_api import Page, Request, expect

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.local import LocalRuntime
from tests.console.browser import (
    OWN_STREAMS,
    WAIT_MS,
    browser_context,
    browser_page,
    browser_tests,
)
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot

pytestmark = browser_tests

POLL = timedelta(milliseconds=200)
"""The console's long poll: a stream asks whether its session still runs after each empty one."""

STOPPED = "Read-only: this session is stopped."

RECORD_LAST_EVENT = """
const OriginalEventSource = window.EventSource;
window.EventSource = function (url) {
  const source = new OriginalEventSource(url);
  source.addEventListener("message", (m) => { window.lastEventType = JSON.parse(m.data).type; });
  return source;
};
"""
"""Keeps in ``window.lastEventType`` the type of the last event the page's streams received."""


def _event_streams(page: Page) -> list[Request]:
    """The event stream requests the page sends, as it sends them."""
    sent: list[Request] = []
    page.on("request", lambda request: sent.append(request) if "/events" in request.url else None)
    return sent


def _snapshots(page: Page) -> tuple[list[Request], list[Request]]:
    """The snapshot requests the page sends, and those whose answer it has received."""
    asked: list[Request] = []
    answered: list[Request] = []
    page.on("request", lambda r: asked.append(r) if r.url.endswith("/snapshot") else None)
    page.on(
        "requestfinished", lambda r: answered.append(r) if r.url.endswith("/snapshot") else None
    )
    return asked, answered


async def _count(requests: list[Request]) -> int:
    return len(requests)


async def _a_minute_later(page: Page) -> None:
    """Run the page's timers a minute on, then wait for a request sent after theirs."""
    await page.clock.run_for(60_000)
    await page.evaluate("fetch('/api/sessions').then((r) => r.text())")


async def _asking_for_approval(client: httpx.AsyncClient, session_id: str) -> None:
    start = {"session_id": session_id, "message": "refund order 7"}
    await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
    await eventually(
        lambda: snapshot(client, session_id),
        lambda body: bool(body["snapshot"]["pending_interrupts"]),
    )


async def _stop(db: Path, session_id: str) -> None:
    async with LocalRuntime(db, [demo_flow()], workers=0, create=False) as other:
        await other.flow_client.stop_flow(session_id, "stopped in another window")


async def test_a_session_stopped_while_its_page_is_open_is_shown_stopped(tmp_path: Path) -> None:
    # Before, the open page kept offering Approve and the composer under "Needs you" until
    # reloaded: a stop writes no event, and the stream only sent keep-alives from then on.
    db = tmp_path / "s.sqlite3"
    app = create_console_app(db, [demo_flow()], poll_timeout=POLL)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await _asking_for_approval(client, "stop-me")
        async with browser_page() as page:
            await page.clock.install()
            streams = _event_streams(page)
            asked, answered = _snapshots(page)
            await page.add_init_script(RECORD_LAST_EVENT)
            await page.add_init_script(OWN_STREAMS)
            await page.goto(f"{url}/sessions/stop-me")
            await expect(page.locator("[data-approve]")).to_be_visible(timeout=WAIT_MS)
            # The stream has replayed the turn, the page's timers stop, and every snapshot it
            # asked for is answered, before the stop: the page can learn of it only from its stream.
            # Read with evaluate: wait_for_function evaluates its text with eval, which the
            # page's content security policy refuses.
            await eventually(
                lambda: page.evaluate("window.lastEventType"),
                lambda last: last == "interrupt_raised",
            )
            # Five seconds on from the page's clock, which runs at the real one's pace since
            # installed: short of the jump the page takes for the machine waking from sleep.
            await page.clock.pause_at(datetime.now(UTC) + timedelta(seconds=5))
            await eventually(lambda: _count(answered), lambda n: n == len(asked))
            await _stop(db, "stop-me")
            await page.clock.resume()
            await expect(page.locator("#main")).to_contain_text(STOPPED, timeout=WAIT_MS)
            await expect(page.locator("#composer")).to_have_count(0)
            await expect(page.locator("[data-approve]")).to_have_count(0)
            await expect(
                page.get_by_role("heading", name="Pending when the session ended")
            ).to_be_visible()
            await expect(page.locator("#notice")).to_have_text("")
            await _a_minute_later(page)
            assert len(streams) == 1


async def test_a_stopped_sessions_page_ends_its_stream_and_opens_no_other(tmp_path: Path) -> None:
    # Before, the stream of a stopped session stayed open as long as its page, the server
    # long-polling a Stream nobody writes to any more.
    db = tmp_path / "s.sqlite3"
    app = create_console_app(db, [demo_flow()], poll_timeout=POLL)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await _asking_for_approval(client, "stopped")
        await _stop(db, "stopped")
        async with browser_page() as page:
            await page.clock.install()
            streams = _event_streams(page)
            # Finished when the server's end reaches the browser first, failed (aborted) when
            # the page closes the stream on its last event first; an open stream does neither.
            over: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def ends(request: Request) -> None:
                if "/events" in request.url and not over.done():
                    over.set_result(None)

            page.on("requestfinished", ends)
            page.on("requestfailed", ends)
            await page.add_init_script(OWN_STREAMS)
            await page.goto(f"{url}/sessions/stopped")
            await expect(page.locator("#main")).to_contain_text(STOPPED)
            await asyncio.wait_for(over, WAIT_MS / 1000)
            await _a_minute_later(page)
            assert len(streams) == 1
            await expect(page.locator("#notice")).to_have_text("")


async def test_a_session_stopped_while_its_page_shares_the_browsers_stream_is_shown_stopped(
    tmp_path: Path,
) -> None:
    # The stream the browser's pages share (a SharedWorker's) tells the page its session
    # ended as its own stream did; another page on the same connection streams on.
    db = tmp_path / "s.sqlite3"
    app = create_console_app(db, [demo_flow()], poll_timeout=POLL)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await _asking_for_approval(client, "stop-me")
        await _asking_for_approval(client, "go-on")
        async with browser_context() as context:
            stopping, going = await context.new_page(), await context.new_page()
            await stopping.goto(f"{url}/sessions/stop-me")
            await going.goto(f"{url}/sessions/go-on")
            for page in (stopping, going):
                await expect(page.locator("[data-approve]")).to_be_visible(timeout=WAIT_MS)
            await _stop(db, "stop-me")
            await expect(stopping.locator("#main")).to_contain_text(STOPPED, timeout=WAIT_MS)
            await expect(stopping.locator("#notice")).to_have_text("")
            await going.click("[data-approve]")
            await expect(going.locator("#messages")).to_contain_text("Done.", timeout=WAIT_MS)
            await expect(going.locator("#notice")).not_to_contain_text("Lost")
