"""``dex-agents serve --model``: the console's worker runs the demo agent on the chat's model."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.adapters.litellm.provider_scripts import chat_reply
from tests.adapters.litellm.provider_server import ProviderServer
from tests.console.serve_process import ServeProcess, free_port
from tests.console.support import CONTROL_HEADERS, eventually, snapshot

ANSWER = "Order 7 shipped on Monday."


async def test_a_message_sent_in_the_console_is_answered_by_the_model_serve_was_given(
    tmp_path: Path,
) -> None:
    async with ProviderServer() as server:
        server.script(chat_reply(ANSWER))
        model = ["--model", "hosted_vllm/my-model", "--api-base", server.url + "/v1"]
        serve = ServeProcess(tmp_path / "db.sqlite3", free_port(), tmp_path / "tools.log", model)
        try:
            await serve.ready()
            async with httpx.AsyncClient(base_url=serve.url) as client:
                started = await client.post(
                    "/api/sessions",
                    json={"session_id": "s", "message": "hello"},
                    headers=CONTROL_HEADERS,
                )
                assert started.json()["ok"] is True
                body = await eventually(
                    lambda: snapshot(client, "s"),
                    lambda b: len(b["snapshot"]["messages"]) == 2,
                )
        finally:
            serve.kill()
        # Before, serve took no --model: its worker answered with the scripted demo model,
        # also a turn of a chat on a real model begun in the console or left by the chat.
        assert body["snapshot"]["messages"][-1]["text"] == ANSWER
        server.assert_script_used()
