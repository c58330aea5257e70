"""The console in a real Chromium: the images of a user message and of a tool's result."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import expect

from dex_agents.adapters.media.memory_store import InMemoryMediaStore
from dex_agents.console import create_console_app
from dex_agents.local import LocalRuntime
from tests.console.agents import SCREENSHOT_TEXT, SEEN_TEXT, asking_image_flow, image_flow
from tests.console.browser import WAIT_MS, browser_page, browser_tests
from tests.console.support import eventually, serve_console, snapshot
from tests.domain.images_support import png

pytestmark = browser_tests


async def test_the_images_of_a_message_and_of_a_tool_result_are_named(tmp_path: Path) -> None:
    # Before, the page showed only the text: a message sent with a picture looked as if it
    # had none, and one with only images as an empty bubble.
    db, media = tmp_path / "s.sqlite3", InMemoryMediaStore()
    flow = image_flow(media)
    app = create_console_app(db, [flow])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        sent = await media.put_image(png())
        async with LocalRuntime(db, [flow], workers=0, create=False) as other:
            await other.sessions(flow).start_session("eyes", "what is on it?", images=[sent])
        await eventually(
            lambda: snapshot(client, "eyes"),
            lambda body: body["console"]["status"] == "waiting for a message",
        )
        async with browser_page() as page:
            await page.goto(f"{url}/sessions/eyes")
            messages = page.locator("#messages")
            await expect(messages).to_contain_text(SEEN_TEXT, timeout=WAIT_MS)
            user = messages.locator(".msg.user")
            await expect(user).to_contain_text("what is on it?")
            await expect(user.locator("[data-image]")).to_have_text(
                [f"image/png image, {sent.size_bytes} bytes"]
            )
            result = messages.locator(".msg.tool", has_text=SCREENSHOT_TEXT)
            await expect(result.locator("[data-image]")).to_have_count(1)


async def test_the_images_of_a_queued_message_are_named(tmp_path: Path) -> None:
    # Before, a queued message's card showed only its text.
    db, media = tmp_path / "s.sqlite3", InMemoryMediaStore()
    flow = asking_image_flow(media)
    app = create_console_app(db, [flow])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        sent = await media.put_image(png())
        async with LocalRuntime(db, [flow], workers=0, create=False) as other:
            sessions = other.sessions(flow)
            await sessions.start_session("patient", "look, once I say which")
            await eventually(
                lambda: snapshot(client, "patient"),
                lambda body: bool(body["snapshot"]["pending_interrupts"]),
            )
            assert await sessions.send_user_message("patient", "this one", images=[sent])
        async with browser_page() as page:
            await page.goto(f"{url}/sessions/patient")
            queued = page.locator(".card", has=page.get_by_role("button", name="Steer now"))
            await expect(queued).to_contain_text("this one", timeout=WAIT_MS)
            await expect(queued.locator("[data-image]")).to_have_text(
                [f"image/png image, {sent.size_bytes} bytes"]
            )
