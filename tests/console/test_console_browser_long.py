"""The console in a real Chromium: a session longer than the snapshot's last 200 messages."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import expect

from dex_agents.console import create_console_app
from dex_agents.local import LocalRuntime
from tests.console.agents import echo_flow
from tests.console.browser import WAIT_MS, needs_chromium, serve_console_and_page

pytestmark = needs_chromium

TURNS = 101
"""A user message and an answer each: 202 messages, two more than the snapshot holds."""


async def test_a_transcript_longer_than_the_snapshot_says_what_it_leaves_out(
    tmp_path: Path,
) -> None:
    # Before, the page began at message 3 as if the session had begun there.
    db, flow = tmp_path / "s.sqlite3", echo_flow()
    async with LocalRuntime(db, [flow], workers=1) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.start_session("long", "message 1")
        await sessions.wait_for_user("long")
        for number in range(2, TURNS + 1):
            assert await sessions.send_user_message("long", f"message {number}")
            await sessions.wait_for_user("long")
    app = create_console_app(db, [flow])
    async with serve_console_and_page(app) as (url, page):
        await page.goto(f"{url}/sessions/long")
        older = page.locator("#older")
        await expect(older).to_have_text(
            "2 earlier messages are not shown: this page holds the last 200.", timeout=WAIT_MS
        )
        await expect(page.locator("#messages .msg").first).to_contain_text("message 2")
