"""Headless Chromium for the console's browser tests: Debian's ``chromium``, driven by Playwright.

Playwright drives ``/usr/bin/chromium`` as it is, through ``executable_path``,
so no browser is downloaded. Without it every browser test skips, naming why
(``./ci.sh`` installs the package where it can).

A module marked ``browser_tests`` runs its tests on the session's event loop with
one Chromium (the ``chromium`` fixture of ``conftest.py``), and each page gets a
browser context of its own: no cookies, storage or cache of another test's, as
with a browser of its own, without starting Playwright and Chromium for each test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route as AppRoute

from dex_agents.ui_stream import AGENT_EVENT_STREAM_HEADERS
from tests.console.support import serve_console

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, ViewportSize

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
"""Mark a browser test: it skips, naming the package, where Chromium is missing."""

browser_tests = [
    needs_chromium,
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.usefixtures("chromium"),
]
"""Mark a module of browser tests (``pytestmark = browser_tests``): they share one Chromium."""


COUNT_SNAPSHOTS_READ = """
window.snapshotsRead = 0;
const json = Response.prototype.json;
Response.prototype.json = function () {
  const read = json.call(this);
  // A task after the body's promise runs after every reaction to it: the page's render too.
  if (this.url.endsWith("/snapshot")) {
    read.finally(() => setTimeout(() => { window.snapshotsRead += 1; }, 0));
  }
  return read;
};
"""
"""Counts in ``window.snapshotsRead`` the snapshots the page has read and acted on."""

OWN_STREAMS = "delete window.SharedWorker;"
"""An init script that takes ``SharedWorker`` from the page, so it opens an event stream of its
own, as in a browser without one: a test can route or count it, where the worker's are not the
page's requests."""

VIEWPORT: ViewportSize = {"width": 1200, "height": 760}


class SharedChromium:
    """The session's Chromium while the ``chromium`` fixture holds it, and the loop it runs on."""

    browser: Browser | None = None
    loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def on_this_loop(cls) -> Browser | None:
        """The shared browser, if it is open and driven from the running loop."""
        browser = cls.browser
        if browser is None or cls.loop is not asyncio.get_running_loop():
            return None
        return browser if browser.is_connected() else None


@contextlib.asynccontextmanager
async def launched_chromium(*, back_forward_cache: bool = False) -> AsyncIterator[Browser]:
    """A headless Chromium, closed on the way out; with ``back_forward_cache``, one that keeps
    pages left for another in it, as a person's browser does (Playwright turns that off)."""
    # Imported here so that collecting the tests needs no Playwright where they skip.
    from playwright.async_api import async_playwright

    kept = ["--disable-back-forward-cache"] if back_forward_cache else None
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, ignore_default_args=kept
        )
        try:
            yield browser
        finally:
            await browser.close()


@contextlib.asynccontextmanager
async def browser_context() -> AsyncIterator[BrowserContext]:
    """A browser context of its own (one profile: its pages share cookies and the browser's
    six connections to a host, as a person's tabs do), closed on the way out.

    It is of the session's Chromium in a module marked ``browser_tests``, else of a
    Chromium of its own.
    """
    async with contextlib.AsyncExitStack() as stack:
        browser = SharedChromium.on_this_loop()
        if browser is None:
            browser = await stack.enter_async_context(launched_chromium())
        context = await browser.new_context(viewport=VIEWPORT)
        stack.push_async_callback(context.close)
        yield context


@contextlib.asynccontextmanager
async def browser_page() -> AsyncIterator[Page]:
    """A new page in a browser context of its own (``browser_context``), closed with it."""
    async with browser_context() as context:
        yield await context.new_page()


@contextlib.asynccontextmanager
async def serve_console_and_page(app: Starlette) -> AsyncIterator[tuple[str, Page]]:
    """``app`` served on loopback and a page open at its inbox: ``(url, page)``."""
    async with serve_console(app) as url, browser_page() as page:
        await page.goto(url + "/")
        yield url, page


async def show_tab(page: Page, state: str) -> None:
    """Make the tab ``visible`` or ``hidden`` as the browser would when the person switches tabs."""
    await page.evaluate(
        """(state) => {
          Object.defineProperty(document, "visibilityState", { value: state, configurable: true });
          document.dispatchEvent(new Event("visibilitychange"));
        }""",
        state,
    )


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


def stream_from(app: Starlette, frames: asyncio.Queue[str]) -> None:
    """Serve every session's event stream from ``frames``, held open between them."""

    async def events(request: Request) -> Response:
        async def follow() -> AsyncIterator[str]:
            while True:
                yield await frames.get()

        return StreamingResponse(follow(), headers=dict(AGENT_EVENT_STREAM_HEADERS))

    app.router.routes.insert(0, AppRoute("/api/sessions/{session_id}/events", events))
