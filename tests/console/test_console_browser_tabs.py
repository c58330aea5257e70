"""The console in a real Chromium with more session tabs open than the browser's six
connections to one host: hidden tabs give theirs back and catch up when shown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from playwright.async_api import Page, expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.ui_stream import AGENT_EVENT_STREAM_HEADERS
from tests.console.browser import (
    OWN_STREAMS,
    WAIT_MS,
    browser_context,
    browser_tests,
    message_texts,
    show_tab,
)
from tests.console.support import CONTROL_HEADERS, eventually, serve_console, snapshot
from tests.ui_stream.sse import Frame, FrameReader, is_type

pytestmark = browser_tests

TABS = 8
"""More than the six connections Chromium opens to one host."""


async def _reply_shown(page: Page, text: str) -> None:
    await expect(page.locator("#messages")).to_contain_text(f"Demo reply: {text}.", timeout=WAIT_MS)


async def _start_sessions(url: str) -> None:
    """Start sessions ``s0`` to ``s{TABS - 1}``, each with the message ``hello N``."""
    async with httpx.AsyncClient(base_url=url) as client:
        for number in range(TABS):
            start = {"session_id": f"s{number}", "message": f"hello {number}"}
            answer = await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            assert answer.json()["ok"] is True


async def test_with_more_than_six_session_tabs_the_shown_one_loads_and_acts(
    tmp_path: Path,
) -> None:
    # Before, each tab's event stream held one of the six connections for as long as it was
    # open: the seventh tab never loaded, and a hidden tab's stream held its connection too.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_context() as context:
        await _start_sessions(url)
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


def _text_frame(like: Frame, token: str, text: str) -> str:
    """A ``text_delta`` frame of the same Step as ``like``, with ``token`` and ``text``."""
    event = dict(like.event)
    event["payload"] = json.dumps({"text": text})
    return f"id: {token}\ndata: {json.dumps(event)}\n\n"


def _streams_from(app: Starlette, streams: list[list[str]], tokens: list[str]) -> None:
    """Serve the n-th event stream opened as ``streams[n]``, then held open; ``tokens`` gets
    each one's ``resume_token``."""

    async def events(request: Request) -> Response:
        frames = streams[len(tokens)]
        tokens.append(request.query_params.get("resume_token", ""))

        async def follow() -> AsyncIterator[str]:
            for frame in frames:
                yield frame
            await asyncio.Event().wait()
            yield ""  # never reached: the page closes the stream

        return StreamingResponse(follow(), headers=dict(AGENT_EVENT_STREAM_HEADERS))

    app.router.routes.insert(0, Route("/api/sessions/{session_id}/events", events))


async def test_a_tab_shown_again_resumes_its_stream_after_the_last_event_it_drew(
    tmp_path: Path,
) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "s", "message": "hello"}
        await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        await eventually(
            lambda: snapshot(client, "s"),
            lambda body: body["snapshot"]["state"]["active_turn_id"] is None,
        )
        events = "/api/sessions/s/events"
        async with client.stream("GET", events, params={"resume_token": ""}) as response:
            real = await FrameReader(response).until(is_type("text_delta"))
        started, delta = real[-2], real[-1]
        first = _text_frame(delta, "first-token", "streamed while shown, ")
        tokens: list[str] = []
        _streams_from(
            app,
            [[started.raw, first], [_text_frame(delta, "second-token", "and after.")]],
            tokens,
        )
        async with browser_context() as context:
            page = await context.new_page()
            await page.add_init_script(OWN_STREAMS)
            await page.goto(f"{url}/sessions/s")
            live = page.locator("#live .msg")
            await expect(live).to_contain_text("streamed while shown, ", timeout=WAIT_MS)
            await show_tab(page, "hidden")
            await show_tab(page, "visible")
            await expect(live).to_contain_text("streamed while shown, and after.", timeout=WAIT_MS)
            # The second stream went on from the last event drawn, not from the snapshot's
            # token (which replays the turn): the text is there once.
            assert tokens[1:] == ["first-token"]
            await expect(live).to_have_count(1)


async def test_each_tab_is_titled_by_its_session_and_whether_it_needs_the_person(
    tmp_path: Path,
) -> None:
    # Before, every tab was titled "dex-agents console": among many none could be told apart.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_context() as context:
        page = await context.new_page()
        await page.goto(f"{url}/")
        await expect(page).to_have_title("Sessions - dex-agents console", timeout=WAIT_MS)
        await page.fill("#new-id", "refund-7")
        await page.fill("#new-message", "refund order 7 $5")
        await page.click("#new-session button[type=submit]")
        await expect(page).to_have_title(
            "needs you: refund-7 - dex-agents console", timeout=WAIT_MS
        )
        await page.locator("[data-approve]").click()
        await expect(page.locator("#messages")).to_contain_text("refunded", timeout=WAIT_MS)
        await expect(page).to_have_title("refund-7 - dex-agents console")


async def test_a_hidden_tab_reads_its_session_now_and_then_so_its_title_says_it_needs_you(
    tmp_path: Path,
) -> None:
    # A hidden tab has no stream: without a read now and then its title never said the
    # session came to wait for the person, where the title is all a person sees of it.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_context() as context:
        async with httpx.AsyncClient(base_url=url) as client:
            start = {"session_id": "q", "message": "hello"}
            await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            page = await context.new_page()
            await page.clock.install()
            await page.goto(f"{url}/sessions/q")
            await _reply_shown(page, "hello")
            await show_tab(page, "hidden")
            message = {"text": "refund order 7 $5"}
            sent = await client.post(
                "/api/sessions/q/controls/send_user_message", json=message, headers=CONTROL_HEADERS
            )
            assert sent.json()["ok"] is True
            await eventually(
                lambda: snapshot(client, "q"),
                lambda body: bool(body["snapshot"]["pending_interrupts"]),
            )
        await page.clock.run_for(15_000)
        await expect(page).to_have_title("needs you: q - dex-agents console", timeout=WAIT_MS)


async def test_eight_session_pages_shown_at_once_all_stream_and_the_eighth_acts(
    tmp_path: Path,
) -> None:
    # Pages shown side by side (windows, not tabs) each held a stream of their own, and the
    # browser's six connections to the console: the seventh page never loaded.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_context() as context:
        await _start_sessions(url)
        pages = []
        for number in range(TABS):
            page = await context.new_page()
            await page.goto(f"{url}/sessions/s{number}", timeout=WAIT_MS)
            await _reply_shown(page, f"hello {number}")
            pages.append(page)
        last = pages[-1]
        await last.fill("#message", "and now")
        await last.click("#send")
        await _reply_shown(last, "and now")
        # Every page still follows its session: a message sent elsewhere shows in the first.
        async with httpx.AsyncClient(base_url=url) as client:
            message = {"text": "from elsewhere"}
            sent = await client.post(
                "/api/sessions/s0/controls/send_user_message", json=message, headers=CONTROL_HEADERS
            )
            assert sent.json()["ok"] is True
        await _reply_shown(pages[0], "from elsewhere")
        texts = await message_texts(pages[0])
        assert len(texts) == len(set(texts)), texts
