"""The console in a real Chromium with more session tabs open than the browser's six
connections to one host: hidden tabs give theirs back and catch up when shown."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import Page, expect

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from tests.console.browser import (
    WAIT_MS,
    browser_context,
    browser_tests,
    message_texts,
    show_tab,
)
from tests.console.support import CONTROL_HEADERS, serve_console

pytestmark = browser_tests

TABS = 8
"""More than the six connections Chromium opens to one host."""


async def _reply_shown(page: Page, text: str) -> None:
    await expect(page.locator("#messages")).to_contain_text(f"Demo reply: {text}.", timeout=WAIT_MS)


async def test_with_more_than_six_session_tabs_the_shown_one_loads_and_acts(
    tmp_path: Path,
) -> None:
    # Before, each tab's event stream held one of the six connections for as long as it was
    # open: the seventh tab never loaded, and a hidden tab's stream held its connection too.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_context() as context:
        async with httpx.AsyncClient(base_url=url) as client:
            for number in range(TABS):
                start = {"session_id": f"s{number}", "message": f"hello {number}"}
                answer = await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
                assert answer.json()["ok"] is True
        tabs = []
        for number in range(TABS):
            tab = await context.new_page()
            await tab.goto(f"{url}/sessions/s{number}", timeout=WAIT_MS)
            await _reply_shown(tab, f"hello {number}")
            tabs.append(tab)
            if number < TABS - 1:
                await show_tab(tab, "hidden")
        shown = tabs[-1]
        await shown.fill("#message", "and now")
        await shown.click("#send")
        await _reply_shown(shown, "and now")

        # A message sent to a hidden tab's session: shown again, the tab draws what its
        # stream missed, each message once, and no text left streaming.
        first = tabs[0]
        async with httpx.AsyncClient(base_url=url) as client:
            message = {"text": "while hidden"}
            sent = await client.post(
                "/api/sessions/s0/controls/send_user_message", json=message, headers=CONTROL_HEADERS
            )
            assert sent.json()["ok"] is True
        await show_tab(first, "visible")
        await _reply_shown(first, "while hidden")
        await expect(first.locator("#live .msg")).to_have_count(0)
        texts = await message_texts(first)
        assert len(texts) == len(set(texts)), texts
