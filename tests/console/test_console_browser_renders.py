"""The console in a real Chromium: what a render of the session's page keeps in place."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import expect

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from tests.console.browser import WAIT_MS, browser_tests, serve_console_and_page
from tests.console.support import CONTROL_HEADERS

pytestmark = browser_tests


async def test_a_turn_leaves_the_messages_shown_and_the_selection_in_them_in_place(
    tmp_path: Path,
) -> None:
    # Before, each event's snapshot drew the whole page anew: text the person had selected
    # (to copy a tool's output, say) was unselected by whatever the session did next, and a
    # click pressed across a render was lost with the button under it.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console_and_page(app) as (url, page):
        async with httpx.AsyncClient(base_url=url) as client:
            start = {"session_id": "s", "message": "where is order 7"}
            await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            await page.goto(f"{url}/sessions/s")
            messages = page.locator("#messages")
            await expect(messages).to_contain_text("Done. lookup_order", timeout=WAIT_MS)
            sequence = await page.locator("#messages .msg.tool").last.get_attribute("data-sequence")
            output = page.locator(f'#messages [data-sequence="{sequence}"]')
            await output.evaluate(
                """(node) => {
                  node.keptByTest = true;
                  getSelection().selectAllChildren(node);
                }"""
            )
            selected = await page.evaluate("getSelection().toString()")
            assert "shipped" in selected
            sent = await client.post(
                "/api/sessions/s/controls/send_user_message",
                json={"text": "where is order 8"},
                headers=CONTROL_HEADERS,
            )
            assert sent.json()["ok"] is True
        await expect(messages).to_contain_text(
            'Done. lookup_order: {"order_id": "8"', timeout=WAIT_MS
        )
        await expect(page.locator("#messages .msg.tool")).to_have_count(4)
        assert await output.evaluate("(node) => node.keptByTest === true")
        assert await page.evaluate("getSelection().toString()") == selected
