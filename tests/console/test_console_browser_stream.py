"""The console in a real Chromium: what the page makes of the session's events and snapshots.

Each test takes the frames and snapshots the server sends for a real session
and serves exactly those to the page, in the order the test needs, through
Playwright's routes (a fixed stream that then ends, a snapshot held back or
refused) or a route of the app's own (a stream fed one frame at a time), so
what the page shows at the end is what those answers made of it, with no
other request changing it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, Route, expect

from dex_agents.console import create_console_app
from tests.console.agents import ACCOUNT_QUESTION, account_flow
from tests.console.browser import (
    COUNT_SNAPSHOTS_READ,
    OWN_STREAMS,
    WAIT_MS,
    browser_page,
    browser_tests,
    stream_from,
)
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot
from tests.ui_stream.sse import Frame, FrameReader, is_type

pytestmark = browser_tests

LOST_STREAM = "Lost the session's live stream"


async def _frames_until(
    client: httpx.AsyncClient,
    session_id: str,
    last_type: str,
    body: dict[str, Any] | None = None,
) -> list[Frame]:
    """The frames the server sends from the token of snapshot ``body`` (default: a new one),
    up to the first ``last_type`` event."""
    token = (body or await snapshot(client, session_id))["resume_token"]
    url = f"/api/sessions/{session_id}/events"
    async with client.stream("GET", url, params={"resume_token": token}) as response:
        return await FrameReader(response).until(is_type(last_type))


async def _open_with_frames(page: Page, url: str, session_id: str, frames: str) -> None:
    """Open the session's page with ``frames`` as its whole stream; later snapshots answer 503."""
    snapshots = 0

    async def snapshot_route(route: Route) -> None:
        nonlocal snapshots
        snapshots += 1
        if snapshots == 1:
            await route.continue_()
        else:
            await route.fulfill(status=503, json={"ok": False, "reason": "held by the test"})

    async def events_route(route: Route) -> None:
        await route.fulfill(status=200, content_type="text/event-stream", body=frames)

    base = f"{url}/api/sessions/{session_id}"
    await page.route(f"{base}/snapshot", snapshot_route)
    await page.route(f"{base}/events?*", events_route)
    await page.add_init_script(OWN_STREAMS)
    await page.goto(f"{url}/sessions/{session_id}")
    # EventSource reports the stream's end after it dispatched every event in it.
    await expect(page.locator("#notice")).to_contain_text(LOST_STREAM, timeout=WAIT_MS)


async def test_a_started_tool_that_asks_shows_its_wait_not_running(tmp_path: Path) -> None:
    # tool_call_started marks the call running; its question must end that, or the page shows
    # the call running for as long as it waits for the person.
    app = create_console_app(tmp_path / "s.sqlite3", [account_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "charge-1", "message": "charge my account"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        await eventually(
            lambda: snapshot(client, "charge-1"),
            lambda body: bool(body["snapshot"]["pending_interrupts"]),
        )
        frames = "".join(f.raw for f in await _frames_until(client, "charge-1", "interrupt_raised"))
        assert "tool_call_started" in frames
        async with browser_page() as page:
            await _open_with_frames(page, url, "charge-1", frames)
            await expect(page.locator(".card.attention")).to_contain_text(ACCOUNT_QUESTION)
            await expect(page.locator("[data-tool-status]")).to_have_text("awaiting_answer")


async def _ask_then_answer(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    """Start an ``AccountAgent`` session; once it asks, its snapshot, and then answer it."""
    start = {"session_id": session_id, "message": "charge my account"}
    await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
    asking = await eventually(
        lambda: snapshot(client, session_id),
        lambda body: bool(body["snapshot"]["pending_interrupts"]),
    )
    interrupt_id = asking["snapshot"]["pending_interrupts"][0]["interrupt_id"]
    await client.post(
        f"/api/sessions/{session_id}/controls/answer_question",
        json={"interrupt_id": interrupt_id, "answer": "savings"},
        headers=CONTROL_HEADERS,
    )
    return asking


async def test_a_snapshot_answered_after_a_newer_one_is_not_shown(tmp_path: Path) -> None:
    # The page's snapshots can answer out of order: one asked for before the turn ended but
    # answered after the one asked for after it would show the turn running again, until the
    # next event, which an idle session never sends.
    app = create_console_app(tmp_path / "s.sqlite3", [account_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        asking = await _ask_then_answer(client, "charge-2")
        read = await _frames_until(client, "charge-2", "interrupt_raised", asking)
        frames = "".join(frame.raw for frame in read)
        done = await eventually(
            lambda: snapshot(client, "charge-2"),
            lambda body: body["snapshot"]["state"]["active_turn_id"] is None,
        )
        held: list[Route] = []
        third = asyncio.Event()

        async def snapshot_route(route: Route) -> None:
            # 1: the page's first, the session asking; 2: after the events, held back;
            # 3: after the stream ended, the turn done.
            held.append(route)
            if len(held) == 1:
                await route.fulfill(json=asking)
            elif len(held) >= 3:
                third.set()
                await route.fulfill(json=done)

        events_opened = 0

        async def events_route(route: Route) -> None:
            nonlocal events_opened
            events_opened += 1
            if events_opened == 1:
                await route.fulfill(status=200, content_type="text/event-stream", body=frames)
            # Later streams stay open without an event: nothing else changes the page.

        async with browser_page() as page:
            await page.add_init_script(COUNT_SNAPSHOTS_READ)
            await page.route(f"{url}/api/sessions/charge-2/snapshot", snapshot_route)
            await page.route(f"{url}/api/sessions/charge-2/events?*", events_route)
            await page.add_init_script(OWN_STREAMS)
            await page.goto(f"{url}/sessions/charge-2")
            messages = page.locator("#messages")
            await expect(messages).to_contain_text("done: charged savings", timeout=WAIT_MS)
            await third.wait()
            await held[1].fulfill(json=asking)
            # Read with evaluate: wait_for_function evaluates its text with eval, which the
            # page's content security policy refuses.
            await eventually(lambda: page.evaluate("window.snapshotsRead"), lambda read: read >= 3)
            await expect(messages).to_contain_text("done: charged savings")
            await expect(page.locator(".card.attention")).to_have_count(0)


async def test_a_snapshot_that_failed_is_asked_for_again_while_the_stream_is_open(
    tmp_path: Path,
) -> None:
    # An event makes the page read the snapshot; when that read fails and no event follows, as
    # in an idle session, the page must still come to show the session as it is.
    app = create_console_app(tmp_path / "s.sqlite3", [account_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        asking = await _ask_then_answer(client, "charge-3")
        raised = (await _frames_until(client, "charge-3", "interrupt_raised", asking))[-1]
        frames: asyncio.Queue[str] = asyncio.Queue()
        stream_from(app, frames)
        answers = ["asking"]  # what the page's next snapshot gets; the rest are the server's

        async def snapshot_route(route: Route) -> None:
            answer = answers.pop(0) if answers else "server"
            if answer == "asking":
                await route.fulfill(json=asking)
            elif answer == "busy":
                await route.fulfill(status=503, json={"ok": False, "reason": "busy"})
            else:
                await route.continue_()

        async with browser_page() as page:
            await page.route(f"{url}/api/sessions/charge-3/snapshot", snapshot_route)
            await page.add_init_script(OWN_STREAMS)
            await page.goto(f"{url}/sessions/charge-3")
            card = page.locator(".card.attention")
            await expect(card).to_contain_text(ACCOUNT_QUESTION, timeout=WAIT_MS)
            answers.append("busy")
            await frames.put(raised.raw)
            await expect(page.locator("#notice")).to_contain_text("Cannot load the session")
            await expect(page.locator("#messages")).to_contain_text(
                "done: charged savings", timeout=WAIT_MS
            )
            await expect(card).to_have_count(0)
            await expect(page.locator("#notice")).to_have_text("reconnected")
