"""The console in a real Chromium: a session longer than the snapshot's last 200 messages,
its earlier messages read back a page at a time, and text too wide for its box."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from playwright.async_api import expect

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from tests.console.agents import echo_flow, echo_session
from tests.console.browser import WAIT_MS, browser_tests, serve_console_and_page
from tests.console.support import CONTROL_HEADERS

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = browser_tests


TURNS = 101
"""A user message and an answer each: 202 messages, two more than the snapshot holds."""


async def test_a_transcript_longer_than_the_snapshot_says_what_it_leaves_out(
    tmp_path: Path,
) -> None:
    # Before, the page began at message 3 as if the session had begun there.
    db = tmp_path / "s.sqlite3"
    await echo_session(db, "long", TURNS)
    app = create_console_app(db, [echo_flow()])
    async with serve_console_and_page(app) as (url, page):
        await page.goto(f"{url}/sessions/long")
        older = page.locator("#older")
        await expect(older).to_have_text(
            "2 earlier messages are not shown: this page holds the last 200.", timeout=WAIT_MS
        )
        await expect(page.locator("#messages .msg").first).to_contain_text("message 2")


LONGER_TURNS = 225
"""450 messages: the snapshot's 200, a page of 200 before them, and 50 before that."""


async def _top(page: Page, sequence: int) -> float:
    """Where message ``sequence`` is on the screen, once the browser has drawn twice more:
    a scroll the browser adjusts by itself lands by then."""
    await page.evaluate(
        "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
    )
    box = await page.locator(f'#messages [data-sequence="{sequence}"]').bounding_box()
    assert box is not None
    return float(box["y"])


async def test_earlier_messages_load_above_without_moving_what_the_person_reads(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.sqlite3"
    await echo_session(db, "longer", LONGER_TURNS)
    app = create_console_app(db, [echo_flow()])
    async with serve_console_and_page(app) as (url, page):
        await page.goto(f"{url}/sessions/longer")
        older, shown = page.locator("#older"), page.locator("#messages .msg")
        await expect(older).to_have_text(
            "250 earlier messages are not shown: this page holds the last 200.", timeout=WAIT_MS
        )
        before = await _top(page, 251)
        await page.click("#show-earlier")
        await expect(shown).to_have_count(400, timeout=WAIT_MS)
        assert abs(await _top(page, 251) - before) <= 1
        await expect(older).to_have_text(
            "50 earlier messages are not shown: this page holds the last 400."
        )
        await page.click("#show-earlier")
        await expect(shown).to_have_count(450, timeout=WAIT_MS)
        await expect(shown.first).to_contain_text("message 1")
        await expect(older).to_have_count(0)
        await expect(page.locator("#show-earlier")).to_have_count(0)
        # The live stream goes on: a new turn's messages join the end, and the two that leave
        # the snapshot's last 200 stay shown at the top of theirs.
        await page.fill("#message", "message 226")
        await page.click("#send")
        await expect(shown).to_have_count(452, timeout=WAIT_MS)
        sequences = await shown.evaluate_all("ms => ms.map((m) => Number(m.dataset.sequence))")
        assert sequences == list(range(1, 453))
        await expect(shown.last).to_contain_text("ok")
        await expect(page.locator("#notice")).not_to_contain_text("Lost")


OVERFLOWING = """() => [document.documentElement, ...document.querySelectorAll("h1, td, .msg")]
  .filter((node) => node.scrollWidth > node.clientWidth)
  .map((node) => node.tagName + "." + node.className)"""
"""The page's elements whose text runs out of their box, sideways."""


async def test_text_with_no_space_breaks_inside_its_box(tmp_path: Path) -> None:
    # Before, a token with no space (a tool's JSON output, a URL, a long session ID) ran out of
    # its message, over the right column, and the page scrolled sideways, as did the inbox.
    session_id = "s" + "y" * 150
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console_and_page(app) as (url, page):
        async with httpx.AsyncClient(base_url=url) as client:
            start = {"session_id": session_id, "message": "see " + "x" * 400}
            await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        await expect(page.locator("#inbox")).to_contain_text(session_id, timeout=WAIT_MS)
        assert await page.evaluate(OVERFLOWING) == []
        await page.goto(f"{url}/sessions/{session_id}")
        await expect(page.locator("#messages")).to_contain_text("Demo reply", timeout=WAIT_MS)
        assert await page.evaluate(OVERFLOWING) == []
