"""The console in a real Chromium: a session the server does not have, or does not allow this
person, stops the page's requests.

The page's timers run on Playwright's clock, so a minute of retries passes at once;
a fetch of the page's own, answered after them, makes sure every request they
started has been seen.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import Page, Request, Route, expect
from starlette.requests import Request as StarletteRequest

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from tests.console.browser import OWN_STREAMS, WAIT_MS, browser_page, browser_tests
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot

pytestmark = browser_tests

GONE = "it never existed, or it was removed"


def _api_requests(page: Page) -> list[str]:
    """The path and kind (``snapshot``, ``events``) of each session API request the page sends."""
    sent: list[str] = []

    def seen(request: Request) -> None:
        if "/api/sessions/" in request.url:
            sent.append(request.url.split("/api/sessions/", 1)[1].split("?", 1)[0])

    page.on("request", seen)
    return sent


async def _a_minute_later(page: Page) -> None:
    """Run the page's timers a minute on, then wait for a request sent after theirs."""
    await page.clock.run_for(60_000)
    await page.evaluate("fetch('/api/sessions').then((r) => r.text())")


async def test_a_session_that_never_existed_is_asked_for_once(tmp_path: Path) -> None:
    # Before, the page asked for its snapshot every second for as long as it stayed open,
    # under "Cannot load the session: no such session; reconnecting…".
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_page() as page:
        await page.clock.install()
        sent = _api_requests(page)
        await page.goto(f"{url}/sessions/nobody")
        await expect(page.locator("h1")).to_have_text("No such session", timeout=WAIT_MS)
        await expect(page.locator("#main")).to_contain_text(f"no session nobody: {GONE}")
        await expect(page.locator("#notice")).to_have_text("")
        await _a_minute_later(page)
        assert sent == ["nobody/snapshot"]


async def test_a_session_removed_while_its_page_is_open_stops_the_page(tmp_path: Path) -> None:
    # The session's stream ends and, from then on, the server answers for it as for an ID it
    # never had (the answers of "removed" below), as after retention removed it.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "idle", "message": "where is order 7"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        await eventually(
            lambda: snapshot(client, "idle"),
            lambda body: body["console"]["status"] == "waiting for a message",
        )
        removed = False

        async def snapshot_route(route: Route) -> None:
            if removed:
                await route.continue_(url=f"{url}/api/sessions/removed/snapshot")
            else:
                await route.continue_()

        async def events_route(route: Route) -> None:
            await route.fulfill(status=200, content_type="text/event-stream", body="")

        async with browser_page() as page:
            await page.clock.install()
            await page.route(f"{url}/api/sessions/idle/snapshot", snapshot_route)
            await page.route(f"{url}/api/sessions/idle/events?*", events_route)
            sent = _api_requests(page)
            await page.add_init_script(OWN_STREAMS)
            await page.goto(f"{url}/sessions/idle")
            await expect(page.locator("#status")).to_have_text("waiting for a message")
            removed = True
            await page.clock.run_for(5_000)
            await expect(page.locator("h1")).to_have_text("No such session", timeout=WAIT_MS)
            await expect(page.locator("#main")).to_contain_text(f"no session idle: {GONE}")
            asked = len(sent)
            await _a_minute_later(page)
            assert sent[asked:] == []
            assert sent[-1] == "idle/snapshot"


async def test_the_pages_of_the_console_ask_for_nothing_that_is_not_there(tmp_path: Path) -> None:
    # Before, each load asked for /favicon.ico, which the console does not have: a 404 in the
    # browser's console on every page, among which a real one was easy to miss. Playwright
    # reports no event for that request, so the browser's console is read.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "idle", "message": "where is order 7"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        async with browser_page() as page:
            errors: list[str] = []
            page.on(
                "console", lambda m: errors.append(m.location["url"]) if m.type == "error" else None
            )
            for path in ("/", "/sessions/idle"):
                await page.goto(url + path)
                await expect(page.locator("h1")).not_to_have_text("Loading…")
                await expect(page.locator("#notice")).to_have_text("")
                await page.evaluate("fetch('/api/sessions').then((r) => r.text())")
            assert errors == []


async def test_a_session_the_application_does_not_allow_is_asked_for_once(tmp_path: Path) -> None:
    # As for a missing session: the page asked every second, under "reconnecting…", for a
    # session the application's authorize hook refuses to this person.
    async def only_public(request: StarletteRequest, session_id: str) -> bool:
        return session_id != "secret"

    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], authorize=only_public)
    async with serve_console(app) as url, browser_page() as page:
        await page.clock.install()
        sent = _api_requests(page)
        await page.goto(f"{url}/sessions/secret")
        await expect(page.locator("h1")).to_have_text("Not allowed", timeout=WAIT_MS)
        await expect(page.locator("#main")).to_contain_text("not allowed to see session secret")
        await expect(page.locator("#notice")).to_have_text("")
        await _a_minute_later(page)
        assert sent == ["secret/snapshot"]
