"""The console in a real Chromium: a refund approved from the page, a screenshot, a bad address,
and a turn another window cancelled or a session it stopped (mid model call too)."""

from __future__ import annotations

import asyncio
import functools
import os
from pathlib import Path

import httpx
from playwright.async_api import expect

from dex_agents import AgentSessionFlow
from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.local import LocalRuntime
from dex_agents.ports.runner import AgentTurnContext
from tests.app.scripted_runner import ScriptedRunner
from tests.console.browser import WAIT_MS, browser_page, browser_tests, serve_console_and_page
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"
SCREENSHOT_ENV = "DEX_AGENTS_CONSOLE_SCREENSHOT"
"""Set to 1 to write ``docs/console.png`` from this test."""

pytestmark = browser_tests


async def test_approve_from_the_page_and_the_tools_result_appears(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        await client.post(
            "/api/sessions",
            json={"session_id": "where", "message": "where is order 7"},
            headers=CONTROL_HEADERS,
        )
        async with browser_page() as page:
            await page.goto(url + "/")
            await page.fill("#new-id", "refund-7")
            await page.fill("#new-message", "refund order 7 $5")
            await page.click("#new-session button[type=submit]")
            await page.wait_for_url("**/sessions/refund-7")
            approve = page.locator("[data-approve]")
            await expect(approve).to_be_visible(timeout=WAIT_MS)
            await page.goto(url + "/")
            row = page.locator("#inbox tbody tr").first
            await expect(row).to_contain_text("refund-7", timeout=10_000)
            await expect(row).to_contain_text("approval of refund_order")
            await row.locator("a").click()
            await expect(approve).to_be_visible(timeout=WAIT_MS)
            if os.environ.get(SCREENSHOT_ENV) == "1":
                await page.screenshot(path=str(SCREENSHOT), full_page=True)
            await approve.click()
            await expect(page.locator("#notice")).to_have_text("approved")
            await expect(page.locator("#messages")).to_contain_text(
                "refunded 500 cents on order 7", timeout=WAIT_MS
            )
            await expect(page.locator("[data-approve]")).to_have_count(0)


async def test_an_address_with_a_bare_percent_names_no_session(tmp_path: Path) -> None:
    # decodeURIComponent refuses "100%": the page stopped at "Loading..." with no word why.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console_and_page(app) as (url, page):
        await page.goto(url + "/sessions/100%")
        await expect(page.locator("h1")).to_have_text("No such session")
        await expect(page.locator("#main")).to_contain_text("write a % in a session ID as %25")
        await page.get_by_role("link", name="All sessions").click()
        await expect(page.locator("#inbox")).to_be_visible()


async def test_a_session_another_window_stopped_says_so_where_the_composer_was(
    tmp_path: Path,
) -> None:
    # Before, its page said "this console does not run this Flow type", of the very Flow
    # type the console runs: a stopped session is read-only because it is stopped.
    db = tmp_path / "s.sqlite3"
    app = create_console_app(db, [demo_flow()])
    async with serve_console_and_page(app) as (_, page):
        await page.fill("#new-id", "stop-me")
        await page.fill("#new-message", "refund order 7")
        await page.click("#new-session button[type=submit]")
        await page.wait_for_url("**/sessions/stop-me")
        await expect(page.locator("[data-approve]")).to_be_visible(timeout=WAIT_MS)
        async with LocalRuntime(db, [demo_flow()], workers=0, create=False) as other:
            await other.flow_client.stop_flow("stop-me", "stopped in another window")
        await page.reload()
        await expect(page.locator("#main")).to_contain_text(
            "Read-only: this session is stopped.", timeout=WAIT_MS
        )
        await expect(page.locator("#composer")).to_have_count(0)
        # Its approval can never be given now: the page does not say it needs the person.
        await expect(page.locator("h2")).to_contain_text(["Pending when the session ended"])
        await expect(page.get_by_role("heading", name="Needs you")).to_have_count(0)


async def test_a_turn_another_window_cancels_is_said_to_be_cancelled(tmp_path: Path) -> None:
    # Before, the approval card went and the page showed the idle session, as after a
    # completed turn: its snapshot did not say that the turn was cancelled. Then only the
    # live event's notice said it, so the page reloaded later said nothing of it.
    db = tmp_path / "s.sqlite3"
    app = create_console_app(db, [demo_flow()])
    async with serve_console_and_page(app) as (_, page):
        await page.fill("#new-id", "cancel-me")
        await page.fill("#new-message", "refund order 7")
        await page.click("#new-session button[type=submit]")
        await page.wait_for_url("**/sessions/cancel-me")
        await expect(page.locator("[data-approve]")).to_be_visible(timeout=WAIT_MS)
        flow = demo_flow()
        async with LocalRuntime(db, [flow], workers=0, create=False) as other:
            sessions = other.sessions(flow)
            snapshot = await sessions.get_agent_snapshot("cancel-me")
            assert snapshot.state is not None
            assert snapshot.state.active_turn_id is not None
            assert await sessions.cancel_turn("cancel-me", snapshot.state.active_turn_id)
        await expect(page.locator("#notice")).to_have_text("turn cancelled", timeout=WAIT_MS)
        await expect(page.locator("[data-approve]")).to_have_count(0)
        cancelled = "waiting for a message (its last turn was cancelled)"
        await expect(page.locator("#status")).to_have_text(cancelled)
        await page.reload()
        await expect(page.locator("#status")).to_have_text(cancelled, timeout=WAIT_MS)
        await expect(page.locator("#notice")).to_have_text("")


class _HeldModel(ScriptedRunner):
    """Writes part of its answer as live text, then holds the model call until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        turn.events.write_text_delta("half an ans")
        await self.release.wait()
        return await super().run_model_step(turn)


async def test_a_session_stopped_mid_model_call_shows_its_text_as_unfinished_not_streaming(
    tmp_path: Path,
) -> None:
    # Before, the page replayed the stopped turn's live text from the Stream and showed it
    # as "assistant (streaming)", as if the model still wrote it; nothing ever will.
    db = tmp_path / "s.sqlite3"
    runner = _HeldModel()
    flow = AgentSessionFlow(runner, flow_type="HeldAgent")
    app = create_console_app(db, [flow])
    try:
        async with serve_console_and_page(app) as (_, page):
            await page.fill("#new-id", "held")
            await page.fill("#new-message", "hello")
            await page.click("#new-session button[type=submit]")
            await page.wait_for_url("**/sessions/held")
            live = page.locator("#live")
            await expect(live).to_contain_text("assistant (streaming)", timeout=WAIT_MS)
            await expect(live).to_contain_text("half an ans")
            async with LocalRuntime(db, [flow], workers=0, create=False) as other:
                await other.flow_client.stop_flow("held", "stopped in another window")
            await page.reload()
            await expect(page.locator("#main")).to_contain_text(
                "Read-only: this session is stopped.", timeout=WAIT_MS
            )
            await expect(live).to_contain_text("half an ans")
            await expect(live).to_contain_text("assistant (unfinished when the session ended)")
            await expect(live).not_to_contain_text("streaming")
    finally:
        runner.release.set()


async def test_a_stopped_session_in_the_inbox_is_not_working_nor_waiting(tmp_path: Path) -> None:
    # Before, its row read "working stopped", and its Waits for column still named the
    # approval it can never take.
    db = tmp_path / "s.sqlite3"
    app = create_console_app(db, [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        for session_id in ("stopped", "waiting"):
            start = {"session_id": session_id, "message": "refund order 7"}
            await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            await eventually(
                functools.partial(snapshot, client, session_id),
                lambda body: bool(body["snapshot"]["pending_interrupts"]),
            )
        async with LocalRuntime(db, [demo_flow()], workers=0, create=False) as other:
            await other.flow_client.stop_flow("stopped", "stopped in another window")
        async with browser_page() as page:
            await page.goto(url + "/")
            stopped = page.locator('#inbox tr[data-session="stopped"]')
            await expect(stopped.locator("td").nth(2)).to_have_text("stopped", timeout=WAIT_MS)
            await expect(stopped.locator("td").nth(3)).to_have_text("-")
            waiting = page.locator('#inbox tr[data-session="waiting"]')
            await expect(waiting.locator("td").nth(3)).to_have_text("approval of refund_order")


async def test_a_working_session_in_the_inbox_says_working_once(tmp_path: Path) -> None:
    # Before, a "working" badge stood before the status, which says it too:
    # "working working (running_model)".
    runner = _HeldModel()
    flow = AgentSessionFlow(runner, flow_type="HeldAgent")
    app = create_console_app(tmp_path / "s.sqlite3", [flow])
    try:
        async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
            start = {"session_id": "busy", "message": "hello"}
            await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            async with browser_page() as page:
                await page.goto(url + "/")
                status = page.locator('#inbox tr[data-session="busy"] td').nth(2)
                await expect(status).to_have_text("working (running_model)", timeout=WAIT_MS)
    finally:
        runner.release.set()
