"""``dex-agents serve --mcp-stdio``: the console's worker runs turns with the chat's MCP tools."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.adapters.litellm.provider_scripts import chat_reply
from tests.adapters.litellm.provider_server import ProviderServer
from tests.console.serve_process import ROOT, message_sent_in_console

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
