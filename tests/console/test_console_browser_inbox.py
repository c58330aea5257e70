"""The inbox in a real Chromium: it refreshes while it is shown, and not in a hidden tab."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import Page, Request, expect

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from tests.console.browser import WAIT_MS, browser_page, browser_tests, show_tab
from tests.console.support import CONTROL_HEADERS, serve_console

pytestmark = browser_tests


async def _sent_so_far(page: Page) -> None:
    """Return once the requests the page's timers sent so far were seen: one sent after them
    was answered."""
    await page.evaluate("fetch('/static/console.css').then((r) => r.text())")


async def test_a_hidden_inbox_asks_for_nothing_and_refreshes_at_once_when_shown(
    tmp_path: Path,
) -> None:
    # Before, a hidden tab asked for the whole inbox every 2 s for as long as it stayed open.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_page() as page:
        inbox = f"{url}/api/sessions"
        asked: list[str] = []

        def seen(request: Request) -> None:
            if request.method == "GET" and request.url == inbox:
                asked.append(request.url)

        await page.clock.install()
        page.on("request", seen)
        await page.goto(url + "/")
        await expect(page.locator("#inbox")).to_contain_text("No sessions yet.", timeout=WAIT_MS)
        # The first load is done and nothing is in flight: the next refresh waits on its timer.
        assert len(asked) == 1
        await show_tab(page, "hidden")
        async with httpx.AsyncClient(base_url=url) as client:
            start = {"session_id": "while-hidden", "message": "where is order 7"}
            await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        await page.clock.run_for(60_000)
        await _sent_so_far(page)
        assert len(asked) == 1
        await expect(page.locator("#inbox")).to_contain_text("No sessions yet.")
        # Shown again: the inbox is read at once, with no timer run on.
        await show_tab(page, "visible")
        row = page.locator("#inbox tbody tr").first
        await expect(row).to_contain_text("while-hidden", timeout=WAIT_MS)
        assert len(asked) == 2
        await page.clock.run_for(2_000)
        await _sent_so_far(page)
        assert len(asked) == 3  # and on with the period while it is shown


async def test_a_refresh_keeps_the_rows_that_did_not_change_and_the_selection_in_them(
    tmp_path: Path,
) -> None:
    # Before, each refresh drew the whole table anew: a click pressed across it was lost, and
    # a session ID the person had selected to copy was unselected within 2 s.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_page() as page:
        async with httpx.AsyncClient(base_url=url) as client:
            start = {"session_id": "kept", "message": "hello"}
            await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            kept = page.locator('#inbox [data-session="kept"]')
            await page.clock.install()
            await page.goto(url + "/")
            await expect(kept).to_contain_text("waiting for a message", timeout=WAIT_MS)
            await kept.locator("a").evaluate(
                """(link) => {
                  link.keptByTest = true;
                  getSelection().selectAllChildren(link);
                }"""
            )
            start = {"session_id": "new", "message": "hello"}
            await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            await page.clock.run_for(2_000)
            await expect(page.locator('#inbox [data-session="new"]')).to_be_visible(timeout=WAIT_MS)
        assert await kept.locator("a").evaluate("(link) => link.keptByTest === true")
        assert await page.evaluate("getSelection().toString()") == "kept"
        await kept.locator("a").click()
        await page.wait_for_url("**/sessions/kept")
