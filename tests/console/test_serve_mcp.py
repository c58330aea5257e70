"""``dex-agents serve --mcp-stdio``: the console's worker runs turns with the chat's MCP tools."""

from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

import httpx

from tests.adapters.litellm.provider_scripts import chat_reply
from tests.adapters.litellm.provider_server import ProviderServer
from tests.console.serve_process import ROOT, ServeProcess, free_port, message_sent_in_console
from tests.console.support import CONTROL_HEADERS

SERVER_SCRIPT = ROOT / "tests" / "adapters" / "mcp" / "mcp_test_server.py"
ANSWER = "Note a says hello."


async def test_a_turn_run_by_serves_worker_calls_a_tool_of_the_mcp_server_serve_was_given(
    tmp_path: Path,
) -> None:
    command = shlex.join([sys.executable, str(SERVER_SCRIPT)])
    async with ProviderServer() as server:
        server.script(
            chat_reply(tool_calls=[("call_1", "mcp_test_server__read_note", '{"name": "a"}')]),
            chat_reply(ANSWER),
        )
        options = [
            *("--model", "hosted_vllm/my-model", "--api-base", server.url + "/v1"),
            *("--mcp-stdio", command),
        ]
        body, stderr = await message_sent_in_console(
            tmp_path,
            options,
            "read note a",
            # The tool call's message comes first; stdio servers start per call.
            lambda b: b["snapshot"]["messages"][-1]["text"] == ANSWER,
            within=60.0,
        )
        # Before, serve took no --mcp-stdio: it refused the flag, and a turn its worker ran
        # (sent in the console, or left by a chat given the server) lacked the tool.
        assert f"mcp: mcp_test_server: {command}" in stderr
        assert body["snapshot"]["messages"][0]["text"] == "read note a"
        server.assert_script_used()
        first, last = server.requests
    offered = [tool["function"]["name"] for tool in first.body["tools"]]
    assert "mcp_test_server__read_note" in offered
    results = [m for m in last.body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in results] == ["note a: hello"]


async def test_serve_stopped_while_a_servers_first_listing_runs_says_nothing_of_it(
    tmp_path: Path,
) -> None:
    # A server that takes the connection and never answers: its first listing outlasts
    # the page's wait for it.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        serve = ServeProcess(
            tmp_path / "db.sqlite3", free_port(), tmp_path / "t.log", ["--mcp-url", url]
        )
        try:
            await serve.ready()
            async with httpx.AsyncClient(base_url=serve.url, timeout=30.0) as client:
                started = await client.post(
                    "/api/sessions", json={"session_id": "s"}, headers=CONTROL_HEADERS
                )
                assert started.json()["ok"] is True
                answer = await client.get("/api/sessions/s/worker")
            assert answer.json()["worker"]["tool_servers"][0]["tools"] is None  # still listing
            await serve.interrupt()
        finally:
            serve.kill()
    # Before, serve cancelled the page's listing before closing the source, and the source
    # warned that the server's tools were left out, as its last words.
    assert "not listed yet" not in serve.stderr()
