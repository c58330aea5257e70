"""``dex-agents serve`` stopped mid-turn and started again: the open page recovers the transcript.

The turn waits for an approval when the server stops (Ctrl-C, with the page's
event stream open). A second process on the same file and port serves it; the
page, left open all along, reconnects by itself, shows the same messages, and
the approval given from it after the restart runs the tool once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from playwright.async_api import expect

from tests.console.browser import WAIT_MS, browser_page, browser_tests, message_texts
from tests.console.serve_process import ServeProcess, free_port

pytestmark = browser_tests


@contextlib.contextmanager
def killed_on_exit(*processes: ServeProcess) -> Iterator[None]:
    """Kill whichever of ``processes`` still runs when the block ends, however it ends."""
    try:
        yield
    finally:
        for process in processes:
            process.kill()


async def test_a_restart_mid_turn_keeps_the_transcript_the_page_shows(tmp_path: Path) -> None:
    db, port, tool_log = tmp_path / "s.sqlite3", free_port(), tmp_path / "tools.log"
    first = ServeProcess(db, port, tool_log)
    with killed_on_exit(first):
        await first.ready()
        async with browser_page() as page:
            await page.goto(first.url + "/")
            await page.fill("#new-id", "refund-7")
            await page.fill("#new-message", "refund order 7 $5")
            await page.click("#new-session button[type=submit]")
            await page.wait_for_url("**/sessions/refund-7")
            await expect(page.locator("[data-approve]")).to_be_visible(timeout=WAIT_MS)
            before = await message_texts(page)
            assert len(before) == 2, before  # the user's message and the refund_order call
            assert "refund order 7 $5" in before[0]

            await first.interrupt()
            assert first.process.returncode in (0, 130), first.stderr()  # 130: Ctrl-C
            notice = page.locator("#notice")
            await expect(notice).to_contain_text("reconnecting", timeout=WAIT_MS)

            second = ServeProcess(db, port, tool_log)
            with killed_on_exit(second):
                await second.ready()
                await expect(notice).to_have_text("reconnected", timeout=WAIT_MS)
                assert await message_texts(page) == before
                await page.locator("[data-approve]").click()
                await expect(notice).to_have_text("approved")
                messages = page.locator("#messages")
                await expect(messages).to_contain_text(
                    "refunded 500 cents on order 7", timeout=WAIT_MS
                )
                await expect(page.locator("#status")).to_have_text(
                    "waiting for a message", timeout=WAIT_MS
                )
                after = await message_texts(page)
                assert after[: len(before)] == before
                assert len(after) == len(before) + 2, after  # the tool's result, then the summary
                assert len(set(after)) == len(after), after
                await page.reload()
                await expect(messages).to_contain_text("refunded 500 cents on order 7")
                assert await message_texts(page) == after
                await second.interrupt()
    assert tool_log.read_text(encoding="utf-8").splitlines() == ["refund_order 7 500"]
