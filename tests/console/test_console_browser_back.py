"""The console in a real Chromium that keeps pages left for another in its back-forward cache:
a session page brought back follows its session again, from the last event it drew."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from tests.console.browser import VIEWPORT, WAIT_MS, browser_tests, launched_chromium, message_texts
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot, texts

pytestmark = browser_tests

RESTORE_TRIES = 3
"""Times the page leaves and comes back until the back-forward cache restores it once."""

COUNT_RESTORES = """
window.restores = 0;
addEventListener("pageshow", (event) => { if (event.persisted) window.restores += 1; });
"""
"""Counts in ``window.restores`` the times the back-forward cache brought the page back."""

TELL_NOTHING_OF_VISIBILITY = """
addEventListener("visibilitychange", (event) => event.stopImmediatePropagation(), true);
"""
"""Keeps ``visibilitychange`` from the page's own listeners, as in a browser that leaves a page
and brings it back telling it only ``pagehide`` and ``pageshow``."""


class RevalidatedPages:
    """Serves the session page with ``Cache-Control: no-cache`` for ``no-store``: Chromium keeps
    no page answered ``no-store`` in its back-forward cache (its reason:
    ``response-cache-control-no-store``), other browsers and its own later rules may."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and scope["path"].startswith("/sessions/"):
                message["headers"] = [
                    (name, b"no-cache" if name == b"cache-control" else value)
                    for name, value in message["headers"]
                ]
            await send(message)

        await self.app(scope, receive, sending)


async def _reply_shown(page: Page, text: str) -> None:
    await expect(page.locator("#messages")).to_contain_text(f"Demo reply: {text}.", timeout=WAIT_MS)


async def _send(client: httpx.AsyncClient, text: str) -> None:
    sent = await client.post(
        "/api/sessions/s/controls/send_user_message", json={"text": text}, headers=CONTROL_HEADERS
    )
    assert sent.json()["ok"] is True
    await eventually(
        lambda: snapshot(client, "s"),
        lambda body: (
            f"Demo reply: {text}." in texts(body)
            and body["snapshot"]["state"]["active_turn_id"] is None
        ),
    )


@pytest.mark.parametrize("told_visibility", [True, False], ids=["told-hidden", "told-nothing"])
async def test_a_page_back_from_the_back_forward_cache_follows_its_session_again(
    tmp_path: Path, told_visibility: bool
) -> None:
    # A page left for another closes its part of the shared stream (pagehide); brought back
    # from the cache, it never opened it again where the browser told it only pageshow, and
    # showed the session as it was until reloaded. (Chromium also says the page was hidden
    # and shown, which opened it again.)
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    app.add_middleware(RevalidatedPages)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "s", "message": "hello"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        async with launched_chromium(back_forward_cache=True) as browser:
            context = await browser.new_context(viewport=VIEWPORT)
            page = await context.new_page()
            await page.add_init_script(COUNT_RESTORES)
            if not told_visibility:
                await page.add_init_script(TELL_NOTHING_OF_VISIBILITY)
            await page.goto(f"{url}/sessions/s")
            await _reply_shown(page, "hello")
            # Chromium may still load a page afresh rather than keep it (a loaded machine's
            # timing); that page shows its session anyway, so go again until one is restored.
            for away in range(1, RESTORE_TRIES + 1):
                await page.goto(f"{url}/")
                await _send(client, f"while away {away}")
                # A page the cache brings back fires no load event: its commit is all there is.
                await page.go_back(wait_until="commit")
                await _reply_shown(page, f"while away {away}")
                if await page.evaluate("window.restores") == 1:
                    break
            assert await page.evaluate("window.restores") == 1
            await _send(client, "after")
            await _reply_shown(page, "after")
            shown = await message_texts(page)
            assert len(shown) == len(set(shown)), shown
            await context.close()
