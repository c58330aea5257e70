"""Headless Chromium for the console's browser tests: Debian's ``chromium``, driven by Playwright.

Playwright drives ``/usr/bin/chromium`` as it is, through ``executable_path``,
so no browser is downloaded. Without it every browser test skips, naming why
(``./ci.sh`` installs the package where it can).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette

from tests.console.support import serve_console

if TYPE_CHECKING:
    from playwright.async_api import Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 15_000
"""How long an ``expect`` waits for the page: a turn on the scripted model takes well under it."""

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="no /usr/bin/chromium: apt-get install -y chromium"
)
"""Mark a module of browser tests: they skip, naming the package, where Chromium is missing."""


@contextlib.asynccontextmanager
async def browser_page() -> AsyncIterator[Page]:
    """A new page of a headless Chromium, closed with its browser on the way out."""
    # Imported here so that collecting the tests needs no Playwright where they skip.
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            yield await browser.new_page(viewport={"width": 1200, "height": 760})
        finally:
            await browser.close()


@contextlib.asynccontextmanager
async def serve_console_and_page(app: Starlette) -> AsyncIterator[tuple[str, Page]]:
    """``app`` served on loopback and a page open at its inbox: ``(url, page)``."""
    async with serve_console(app) as url, browser_page() as page:
        await page.goto(url + "/")
        yield url, page


async def message_texts(page: Page) -> list[str]:
    """The transcript the page shows: each stored message's role label and text, a line each.

    Read from the elements' text, not ``innerText``: that follows layout (the
    label ends in a line break only while it is laid out as a block), and once,
    in a loaded CI run, the same transcript came back without the breaks.
    """
    texts = await page.locator("#messages .msg").evaluate_all(
        "messages => messages.map((m) => Array.from(m.childNodes, (n) => n.textContent).join('\\n'))"
    )
    return [str(text) for text in texts]
