"""The console in a real Chromium: what a render of the session's page keeps in place."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, Route, expect
from starlette.applications import Starlette

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from tests.console.browser import (
    COUNT_SNAPSHOTS_READ,
    OWN_STREAMS,
    WAIT_MS,
    browser_page,
    browser_tests,
    serve_console_and_page,
    stream_from,
)
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot, texts

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


def _frame(number: int, event_type: str, payload: dict[str, Any], attempt: int = 1) -> str:
    """An SSE frame of one event of a model call Step's ``attempt``."""
    event = {
        "type": event_type,
        "turn_id": "turn-9",
        "step_execution_id": "model-call-9",
        "attempt": attempt,
        "payload": json.dumps(payload),
    }
    return f"id: test-{number}\ndata: {json.dumps(event)}\n\n"


async def _idle_session_page(
    app: Starlette, url: str, page: Page, frames: asyncio.Queue[str]
) -> None:
    """Session ``s`` after its first turn, open in ``page`` with its stream fed from ``frames``."""
    async with httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "s", "message": "where is order 7"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        await eventually(
            lambda: snapshot(client, "s"),
            lambda body: (
                body["snapshot"]["state"]["active_turn_id"] is None and "Done." in texts(body)
            ),
        )
    stream_from(app, frames)
    await page.add_init_script(COUNT_SNAPSHOTS_READ)
    await page.add_init_script(OWN_STREAMS)
    await page.goto(f"{url}/sessions/s")
    await expect(page.locator("#messages")).to_contain_text("Done.", timeout=WAIT_MS)


async def test_live_text_that_grows_keeps_the_selection_in_it(tmp_path: Path) -> None:
    # Each text_delta drew the live text anew: a person selecting the model's words to copy
    # them while it still wrote lost the selection at its next word.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    frames: asyncio.Queue[str] = asyncio.Queue()
    async with serve_console(app) as url, browser_page() as page:
        await _idle_session_page(app, url, page, frames)
        live = page.locator("#live")
        await frames.put(_frame(1, "text_delta", {"text": "Order 7 shipped"}))
        await expect(live).to_contain_text("Order 7 shipped", timeout=WAIT_MS)
        await live.evaluate(
            """(holder) => {
              const text = [...holder.querySelector(".msg.live").childNodes].at(-1);
              getSelection().setBaseAndExtent(text, 0, text, 7);
            }"""
        )
        assert await page.evaluate("getSelection().toString()") == "Order 7"
        await frames.put(_frame(2, "text_delta", {"text": " on Monday"}))
        await expect(live).to_contain_text("Order 7 shipped on Monday", timeout=WAIT_MS)
        assert await page.evaluate("getSelection().toString()") == "Order 7"
        # A call that starts makes the page read the snapshot and draw the page again.
        await frames.put(
            _frame(3, "tool_call_started", {"tool_call_id": "c9", "tool_name": "lookup_order"})
        )
        await frames.put(_frame(4, "text_delta", {"text": "."}))
        await expect(live).to_contain_text("on Monday.", timeout=WAIT_MS)
        await eventually(lambda: page.evaluate("window.snapshotsRead"), lambda read: read >= 2)
        assert await page.evaluate("getSelection().toString()") == "Order 7"


async def test_a_send_pressed_across_a_render_that_changes_the_composer_is_sent(
    tmp_path: Path,
) -> None:
    # A turn that starts enables Steer and Cancel turn: the render drew the composer anew, so
    # Send pressed before it and released after it was released on another button, and the
    # click (the message) was lost.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    frames: asyncio.Queue[str] = asyncio.Queue()
    async with serve_console(app) as url, browser_page() as page:
        await _idle_session_page(app, url, page, frames)
        async with httpx.AsyncClient(base_url=url) as client:
            idle = await snapshot(client, "s")
        running = json.loads(json.dumps(idle))
        running["snapshot"]["state"]["active_turn_id"] = "turn-9"
        running["snapshot"]["state"]["accepts_turn_control"] = True

        async def answer_running(route: Route) -> None:
            await route.fulfill(json=running)

        await page.locator("#message").fill("where is order 8")
        await expect(page.locator("#steer")).to_be_disabled()
        send = await page.locator("#send").bounding_box()
        assert send is not None
        await page.mouse.move(send["x"] + send["width"] / 2, send["y"] + send["height"] / 2)
        await page.mouse.down()
        await page.route(f"{url}/api/sessions/s/snapshot", answer_running)
        await frames.put(_frame(1, "turn_started", {"sequence": 3}))
        await expect(page.locator("#steer")).to_be_enabled(timeout=WAIT_MS)
        await page.mouse.up()
        await expect(page.locator("#notice")).to_have_text("message queued", timeout=WAIT_MS)


async def test_a_retried_model_calls_text_replaces_the_dead_attempts_text(tmp_path: Path) -> None:
    # The live text is appended to as it grows: a retry's text, which does not continue the
    # dead attempt's, must replace it, as the design's grouping by attempt says. (No event of
    # the design tells the page of the retry sooner than the new attempt's first one.)
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    frames: asyncio.Queue[str] = asyncio.Queue()
    async with serve_console(app) as url, browser_page() as page:
        await _idle_session_page(app, url, page, frames)
        live = page.locator("#live .msg.live")
        await frames.put(_frame(1, "text_delta", {"text": "Order 7 shi"}))
        await expect(live).to_contain_text("Order 7 shi", timeout=WAIT_MS)
        await frames.put(_frame(2, "text_delta", {"text": "Order 7"}, attempt=2))
        await frames.put(_frame(3, "text_delta", {"text": " left on Monday"}, attempt=2))
        await expect(live).to_have_text(
            "assistant (streaming)Order 7 left on Monday", timeout=WAIT_MS
        )
        await frames.put(_frame(4, "text_delta", {"text": "late words"}, attempt=1))
        await frames.put(_frame(5, "text_delta", {"text": "."}, attempt=2))
        await expect(live).to_have_text("assistant (streaming)Order 7 left on Monday.")
