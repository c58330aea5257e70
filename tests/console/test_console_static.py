"""The page's files: every JavaScript module it imports is served as JavaScript, nothing else
is, and the page runs no script but those."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.async_api import Route, expect

from dex_agents.cli.database import demo_flow
from dex_agents.console import create_console_app
from dex_agents.console.page_files import STATIC_DIR
from dex_agents.console.shared_streams import MAX_SHARED_STREAMS
from tests.console.browser import WAIT_MS, browser_page, needs_chromium
from tests.console.support import serve_console

_SCRIPT = re.compile(r'<script type="module" src="/static/([\w.]+)">')
_IMPORT = re.compile(r'^import .* from "\./([\w.]+)";$', re.MULTILINE)
_WORKER = re.compile(r'new SharedWorker\("/static/([\w.]+)"')


async def test_every_module_the_page_imports_is_served_as_javascript(tmp_path: Path) -> None:
    # A browser runs a module script only when it comes as JavaScript, and a module it
    # cannot fetch stops the whole page at "Loading…".
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        page = await client.get("/")
        to_read = _SCRIPT.findall(page.text)
        assert to_read == ["console.js"]
        served: set[str] = set()
        while to_read:
            name = to_read.pop()
            if name in served:
                continue
            response = await client.get(f"/static/{name}")
            assert response.status_code == 200, name
            assert response.headers["content-type"] == "text/javascript; charset=utf-8"
            assert response.headers["x-content-type-options"] == "nosniff"
            served.add(name)
            to_read.extend(_IMPORT.findall(response.text))
            to_read.extend(_WORKER.findall(response.text))
        # Each module in the package is one the page uses (or its streams' shared worker runs).
        assert served == {path.name for path in STATIC_DIR.glob("*.js")}
        css = await client.get("/static/console.css")
        assert css.headers["content-type"] == "text/css; charset=utf-8"
        for name in ("index.html", "missing.js", "..%2Fapp.py", "../app.py"):
            assert (await client.get(f"/static/{name}")).status_code == 404, name


def test_the_shared_worker_puts_on_one_connection_no_more_streams_than_the_console_takes() -> None:
    # Past the console's limit it refuses the whole connection: each of its streams failed.
    worker = (STATIC_DIR / "stream_worker.js").read_text(encoding="utf-8")
    limits = re.findall(r"^const MAX_STREAMS = (\d+);$", worker, re.MULTILINE)
    assert limits == [str(MAX_SHARED_STREAMS)]


async def test_a_name_no_file_can_have_is_not_found(tmp_path: Path) -> None:
    # A name past the file system's longest (255 bytes) failed the file lookup with
    # "File name too long": 500, and a traceback in the server's log for each such request.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, httpx.AsyncClient(base_url=url) as client:
        for name in ("a" * 300 + ".js", "a%00.js", "console.js%00", "..%5Cconsole.js"):
            answer = await client.get(f"/static/{name}")
            assert (answer.status_code, answer.text) == (404, "Not Found"), name


@needs_chromium
async def test_the_page_runs_only_the_consoles_own_scripts(tmp_path: Path) -> None:
    # The page sets server text only as textContent; should markup ever get in, a script in
    # it must not run. Before, the page's policy said only who may frame it.
    app = create_console_app(tmp_path / "s.sqlite3", [demo_flow()])
    async with serve_console(app) as url, browser_page() as page:

        async def with_injected_script(route: Route) -> None:
            response = await route.fetch()
            body = (await response.text()).replace(
                "</body>", "<script>window.injected = true;</script></body>"
            )
            await route.fulfill(response=response, body=body)

        await page.route(f"{url}/", with_injected_script)
        await page.goto(url + "/")
        await expect(page.locator("#inbox")).to_be_visible(timeout=WAIT_MS)
        assert await page.evaluate("window.injected") is None
