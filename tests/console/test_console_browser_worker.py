"""A session's page says which model and MCP tools ``dex-agents serve``'s worker runs turns with."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from playwright.async_api import Page, expect

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.console.worker_setup import ToolServerSetup, WorkerSetup
from tests.adapters.litellm.provider_scripts import chat_reply
from tests.adapters.litellm.provider_server import ProviderServer
from tests.console.browser import WAIT_MS, browser_page, browser_tests
from tests.console.serve_process import ROOT, ServeProcess, free_port
from tests.console.support import CONTROL_HEADERS, serve_console

pytestmark = browser_tests

SERVER_SCRIPT = ROOT / "tests" / "adapters" / "mcp" / "mcp_test_server.py"
SECRETS = ("hunter2", "sekret-query", "sekret-arg")


async def test_the_session_page_names_the_model_and_each_mcp_servers_tools_without_a_secret(
    tmp_path: Path,
) -> None:
    server_command = [sys.executable, str(SERVER_SCRIPT)]
    closed_port = free_port()
    async with ProviderServer() as provider:
        provider.script(chat_reply("Hello from the model."))
        options = [
            *("--model", "hosted_vllm/my-model", "--api-base", provider.url + "/v1"),
            # A key in a stdio server's arguments, as `env KEY=...` or `--token ...` pass it.
            *("--mcp-stdio", shlex.join(["env", "NOTES_TOKEN=sekret-arg", *server_command])),
            *("--mcp-stdio", shlex.join([*server_command, "--exit"])),  # exits at once
            *("--mcp-url", f"http://me:hunter2@127.0.0.1:{closed_port}/mcp?token=sekret-query"),
        ]
        serve = ServeProcess(tmp_path / "db.sqlite3", free_port(), tmp_path / "t.log", options)
        try:
            await serve.ready()
            async with httpx.AsyncClient(base_url=serve.url) as client:
                started = await client.post(
                    "/api/sessions",
                    json={"session_id": "s", "message": "hello"},
                    headers=CONTROL_HEADERS,
                )
                assert started.json()["ok"] is True
            async with browser_page() as page:
                await page.goto(serve.url + "/sessions/s")
                await expect(page.locator("#messages")).to_contain_text(
                    "Hello from the model.", timeout=WAIT_MS
                )
                worker = page.locator("#worker")
                # Before, the page named no model and no tool: a message sent there was
                # answered by whatever serve was given, and nothing said what.
                await expect(worker).to_contain_text(
                    f"hosted_vllm/my-model at {provider.url}/v1",
                    timeout=WAIT_MS,
                )
                notes = page.locator('[data-tool-server="mcp_test_server"]')
                await expect(notes).to_contain_text("(stdio): ", timeout=WAIT_MS)
                await expect(notes).to_contain_text("mcp_test_server__read_note")
                failed = page.locator('[data-tool-server="mcp_test_server_2"]')
                await expect(failed).to_contain_text("no tools")
                unreachable = page.locator(f'[data-tool-server="local_{closed_port}"]')
                await expect(unreachable).to_contain_text(
                    f"(http://<redacted>@127.0.0.1:{closed_port}/mcp?token=<redacted>): no tools"
                )
                shown = await page.content()
                assert not [secret for secret in SECRETS if secret in shown]
        finally:
            serve.kill()
        provider.assert_script_used()


class _Listing:
    """A worker setup whose one MCP server lists its tools once ``done`` is set."""

    def __init__(self) -> None:
        self.done = False

    async def __call__(self, flow_type: str) -> WorkerSetup:
        tools = ["notes__read"] if self.done else None
        return WorkerSetup(model="m", tool_servers=[ToolServerSetup(name="notes", tools=tools)])


@contextlib.asynccontextmanager
async def _session_page(
    tmp_path: Path, start: dict[str, str]
) -> AsyncIterator[tuple[Page, _Listing]]:
    """A console whose worker's server is still listing, with the page of the session
    started with ``start`` open."""
    listing = _Listing()
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], worker_setup=listing)
    async with serve_console(app) as url, browser_page() as page:
        async with httpx.AsyncClient(base_url=url) as client:
            started = await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
            assert started.json()["ok"] is True
        await page.goto(f"{url}/sessions/{start['session_id']}")
        yield page, listing


async def test_a_server_still_listing_shows_its_tools_once_listed_with_no_turn_run(
    tmp_path: Path,
) -> None:
    async with _session_page(tmp_path, {"session_id": "idle"}) as (page, listing):
        notes = page.locator('[data-tool-server="notes"]')
        await expect(notes).to_have_text("MCP notes (stdio): listing its tools…")
        listing.done = True
        # Before, the page asked again only at a turn's end or a reconnect, and an idle
        # session has neither: it said "listing" for as long as it stayed open.
        await expect(notes).to_have_text("MCP notes (stdio): notes__read", timeout=WAIT_MS)


async def test_the_worker_card_is_drawn_again_alone_leaving_the_messages_in_place(
    tmp_path: Path,
) -> None:
    start = {"session_id": "s", "message": "hello"}
    async with _session_page(tmp_path, start) as (page, listing):
        first = page.locator("#messages .msg").first
        await expect(first).to_contain_text("hello", timeout=WAIT_MS)
        notes = page.locator('[data-tool-server="notes"]')
        await expect(notes).to_have_text("MCP notes (stdio): listing its tools…")
        await first.evaluate("(node) => { node.keptByTest = true; }")
        listing.done = True
        await expect(notes).to_have_text("MCP notes (stdio): notes__read", timeout=WAIT_MS)
        # Before, each read of the worker drew the whole page again: every message was a new
        # node (a person's selection in them lost), and a test that had just found one read
        # its place from a node no longer on the page.
        assert await first.evaluate("(node) => node.keptByTest === true")


async def test_a_failing_worker_setup_hook_says_so_in_the_card_and_the_page_works(
    tmp_path: Path,
) -> None:
    async def failing(flow_type: str) -> WorkerSetup:
        raise RuntimeError("cannot reach https://me:hunter2@models.example")

    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()], worker_setup=failing)
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        start = {"session_id": "s", "message": "hello"}
        started = await client.post("/api/sessions", json=start, headers=CONTROL_HEADERS)
        assert started.json()["ok"] is True
        async with browser_page() as page:
            await page.goto(f"{url}/sessions/s")
            await expect(page.locator("#messages")).to_contain_text(
                "Demo reply: hello.", timeout=WAIT_MS
            )
            # Before, the card was left out, as for a console told nothing.
            await expect(page.locator("#worker")).to_have_text(
                "what the worker runs DemoSupportAgent turns with could not be read: the "
                "console's worker_setup hook raised RuntimeError (see the console's log)",
                timeout=WAIT_MS,
            )
            assert "hunter2" not in await page.content()
            await page.fill("#message", "and now")
            await page.click("#send")
            await expect(page.locator("#messages")).to_contain_text(
                "Demo reply: and now.", timeout=WAIT_MS
            )
