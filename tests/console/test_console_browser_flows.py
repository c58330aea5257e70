"""The console in a real Chromium: questions answered and a draft plan executed from the page."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import Locator, Page, expect

from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.scripted_model import ScriptedModelClient, ScriptedModelReply
from dex_agents.builtin_loop import builtin_agent_session_flow
from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.domain.model_io import ModelRequest
from tests.console.agents import (
    NOTE_QUESTION,
    PLAN_TASKS,
    SPEED_QUESTION,
    SPEEDS,
    plan_flow,
    question_flow,
    shipping_answer,
)
from tests.console.browser import WAIT_MS, browser_tests, message_texts, serve_console_and_page
from tests.console.support import snapshot, texts
from tests.support.retry_intervals import retrying_runtime

pytestmark = browser_tests


async def _ship_a_parcel(page: Page, session_id: str) -> Locator:
    """Start a shipping session from the inbox; its card, once it asks for the speed."""
    await page.fill("#new-id", session_id)
    await page.fill("#new-message", "ship my parcel")
    await page.click("#new-session button[type=submit]")
    await page.wait_for_url(f"**/sessions/{session_id}")
    card = page.locator(".card.attention")
    await expect(card).to_contain_text(SPEED_QUESTION, timeout=WAIT_MS)
    return card


async def test_questions_are_answered_from_the_page_by_choice_and_in_free_text(
    tmp_path: Path,
) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [question_flow()])
    async with serve_console_and_page(app) as (url, page):
        card = await _ship_a_parcel(page, "ship-1")
        # Choices only: one button per choice, and no box for free text.
        for speed in SPEEDS:
            await expect(card.get_by_role("button", name=speed, exact=True)).to_be_visible()
        await expect(card.locator("input[type=text]")).to_have_count(0)
        await card.get_by_role("button", name="express", exact=True).click()
        await expect(page.locator("#notice")).to_have_text("answered")
        await expect(card).to_contain_text(NOTE_QUESTION, timeout=WAIT_MS)
        await card.locator("input[type=text]").fill("leave it at the door")
        await card.get_by_role("button", name="Answer", exact=True).click()
        answer = shipping_answer("express", "leave it at the door")
        await expect(page.locator("#messages")).to_contain_text(answer, timeout=WAIT_MS)
        await expect(page.locator(".card.attention")).to_have_count(0)
        await expect(page.locator("#status")).to_have_text("waiting for a message")
        await expect(page.locator("#steer")).to_be_disabled()
        async with httpx.AsyncClient(base_url=url) as client:
            body = await snapshot(client, "ship-1")
        assert body["snapshot"]["pending_interrupts"] == []
        assert answer in texts(body)


async def test_a_declined_question_lets_the_agent_go_on_without_the_answer(
    tmp_path: Path,
) -> None:
    # Before, the test agent failed its turn on the decline's plain-text result, which no
    # real agent does, so a decline from the page could not be followed any further.
    app = create_console_app(tmp_path / "s.sqlite3", [question_flow()])
    async with serve_console_and_page(app) as (_, page):
        card = await _ship_a_parcel(page, "ship-5")
        await card.get_by_role("button", name="Decline", exact=True).click()
        await expect(page.locator("#notice")).to_have_text("declined")
        await expect(card).to_contain_text(NOTE_QUESTION, timeout=WAIT_MS)
        await card.get_by_role("button", name="Answer", exact=True).wait_for()
        await card.get_by_role("button", name="Decline", exact=True).click()
        answer = shipping_answer(None, None)
        await expect(page.locator("#messages")).to_contain_text(answer, timeout=WAIT_MS)
        await expect(page.locator("#status")).to_have_text("waiting for a message")


async def test_what_the_person_types_outlives_the_renders_that_events_cause(
    tmp_path: Path,
) -> None:
    # Every event renders the page anew; an answer half typed must not be wiped by one.
    app = create_console_app(tmp_path / "s.sqlite3", [question_flow()])
    async with serve_console_and_page(app) as (_, page):
        card = await _ship_a_parcel(page, "ship-2")
        await card.get_by_role("button", name="express", exact=True).click()
        await expect(card).to_contain_text(NOTE_QUESTION, timeout=WAIT_MS)
        await card.locator("input[type=text]").fill("leave it at the door")
        # A message queued from the composer renders the page again, with the queue in it.
        await page.fill("#message", "and wrap it")
        await page.click("#send")
        await expect(page.locator("#notice")).to_have_text("message queued")
        queued = page.locator(".card", has=page.get_by_role("button", name="Steer now"))
        await expect(queued).to_contain_text("and wrap it")
        await expect(card.locator("input[type=text]")).to_have_value("leave it at the door")
        # The message the control took is no draft any more.
        await expect(page.locator("#message")).to_have_value("")
        await card.get_by_role("button", name="Answer", exact=True).click()
        answer = shipping_answer("express", "leave it at the door")
        await expect(page.locator("#messages")).to_contain_text(answer, timeout=WAIT_MS)


async def test_a_double_click_sends_a_control_once(tmp_path: Path) -> None:
    # Both clicks' handlers run before the first answer comes: the second must send nothing.
    app = create_console_app(tmp_path / "s.sqlite3", [question_flow()])
    async with serve_console_and_page(app) as (_, page):
        await _ship_a_parcel(page, "ship-3")
        sent: list[str] = []
        page.on(
            "request",
            lambda request: sent.append(request.url) if request.method == "POST" else None,
        )
        await page.fill("#message", "and wrap it")
        await page.dblclick("#send")
        await expect(page.locator("#notice")).to_have_text("message queued")
        queued = page.locator(".card", has=page.get_by_role("button", name="Steer now"))
        await expect(queued).to_have_count(1)
        assert [url.rsplit("/", 1)[-1] for url in sent] == ["send_user_message"]


async def test_a_draft_plan_is_reviewed_and_executed_from_the_page(tmp_path: Path) -> None:
    app = create_console_app(tmp_path / "s.sqlite3", [plan_flow()])
    async with serve_console_and_page(app) as (url, page):
        await page.fill("#new-id", "migrate-1")
        await page.fill("#new-message", "migrate the orders table")
        await page.check("#new-plan")
        await page.click("#new-session button[type=submit]")
        await page.wait_for_url("**/sessions/migrate-1")
        heading = page.get_by_role("heading", name="Plan (revision")
        await expect(heading).to_have_text("Plan (revision 1, draft)", timeout=WAIT_MS)
        for task in PLAN_TASKS:
            await expect(page.get_by_text(f"[pending] {task}")).to_be_visible()
        execute = page.locator("#execute-plan")
        # The button waits for the planning turn to end: the session takes no approval before.
        await expect(execute).to_be_enabled(timeout=WAIT_MS)
        await execute.click()
        await expect(page.locator("#notice")).to_have_text("plan approved")
        await expect(heading).to_have_text("Plan (revision 2, completed)", timeout=WAIT_MS)
        for task in PLAN_TASKS:
            await expect(page.get_by_text(f"[completed] {task}")).to_be_visible()
        messages = page.locator("#messages")
        await expect(messages).to_contain_text("Migrated: every task is completed.")
        await expect(page.locator("#execute-plan")).to_have_count(0)
        # The session wrote the executing turn's message, not the person: shown as the
        # approval, live and after a reload, as dex-agents show does. Before, it was a user
        # message reading "[Dex] The user approved plan revision 1. Execute it ...".
        approval = ["plan\nplan revision 1 approved; the agent executes it"]
        for reload in (False, True):
            if reload:
                await page.reload()
                await expect(messages).to_contain_text("Migrated", timeout=WAIT_MS)
            shown = await message_texts(page)
            assert [text for text in shown if "approved" in text] == approval
            assert shown[0] == "user\nmigrate the orders table"
        async with httpx.AsyncClient(base_url=url) as client:
            body = await snapshot(client, "migrate-1")
        assert body["snapshot"]["plan"]["status"] == "completed"
        assert body["snapshot"]["state"]["active_turn_id"] is None


async def test_plan_mode_is_offered_only_for_flows_that_have_it(tmp_path: Path) -> None:
    # Before, every composer and the new-session form offered it, and a message sent with it
    # to a Flow with plan mode off came back "Not done: ... (blank, or plan mode is off)".
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow(), plan_flow()])
    async with serve_console_and_page(app) as (url, page):
        plan_box = page.locator("#new-plan")
        await page.select_option("#new-flow", "MigrationAgent")
        await expect(plan_box).to_be_visible()
        await page.select_option("#new-flow", "DemoSupportAgent")
        await expect(plan_box).to_be_hidden()
        await page.fill("#new-id", "chat-1")
        await page.fill("#new-message", "where is order 7")
        await page.click("#new-session button[type=submit]")
        await page.wait_for_url("**/sessions/chat-1")
        await expect(page.locator("#composer")).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator("#plan-mode")).to_have_count(0)
        await page.goto(f"{url}/")
        await page.select_option("#new-flow", "MigrationAgent")
        await page.fill("#new-id", "migrate-2")
        await page.fill("#new-message", "migrate the orders table")
        await page.click("#new-session button[type=submit]")
        await page.wait_for_url("**/sessions/migrate-2")
        await expect(page.locator("#plan-mode")).to_be_visible(timeout=WAIT_MS)


async def test_a_blank_message_is_not_sent_and_the_page_says_why(tmp_path: Path) -> None:
    # Before, Send and Steer posted it, and the session's refusal came back as "Not done: the
    # session did not accept the message (blank, or plan mode is off)".
    app = create_console_app(tmp_path / "s.sqlite3", [question_flow()])
    async with serve_console_and_page(app) as (_, page):
        await _ship_a_parcel(page, "ship-4")
        sent: list[str] = []
        page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
        for button in ("#send", "#steer"):
            await page.fill("#message", "  ")
            await page.click(button)
            await expect(page.locator("#notice")).to_have_text("Type a message first.")
            await page.evaluate("document.getElementById('notice').textContent = ''")
        await page.evaluate("fetch('/api/sessions').then((r) => r.text())")
        assert sent == []


def _model_down(request: ModelRequest) -> ScriptedModelReply:
    raise RuntimeError("the model is down")


async def test_a_failed_turn_names_its_error_once_after_the_status(tmp_path: Path) -> None:
    # Before: "waiting for a message (its last turn failed) last turn failed: the model is down".
    definition = AgentDefinition(
        name="down", instructions="Answer.", model=ScriptedModelClient(_model_down)
    )
    flow = builtin_agent_session_flow(definition, flow_type="DownAgent")
    path = tmp_path / "s.sqlite3"
    # The session's worker runs beside the console, its model call's retries at a hundredth
    # of the policy's interval (the console's own worker would wait its 1 s + 2 s).
    async with retrying_runtime(path, [flow]):
        app = create_console_app(path, [flow], workers=0)
        async with serve_console_and_page(app) as (_, page):
            await page.fill("#new-id", "down-1")
            await page.fill("#new-message", "hello")
            await page.click("#new-session button[type=submit]")
            await page.wait_for_url("**/sessions/down-1")
            await expect(page.locator("#status")).to_have_text(
                # Past the model call's retries.
                "waiting for a message (its last turn failed) the model is down",
                timeout=2 * WAIT_MS,
            )
