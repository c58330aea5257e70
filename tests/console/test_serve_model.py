"""``dex-agents serve --model``: the console's worker runs the demo agent on the chat's model."""

from __future__ import annotations

from pathlib import Path

from tests.adapters.litellm.provider_scripts import chat_reply
from tests.adapters.litellm.provider_server import ProviderServer
from tests.console.serve_process import message_sent_in_console

ANSWER = "Order 7 shipped on Monday."


async def test_a_message_sent_in_the_console_is_answered_by_the_model_serve_was_given(
    tmp_path: Path,
) -> None:
    async with ProviderServer() as server:
        server.script(chat_reply(ANSWER))
        model = ["--model", "hosted_vllm/my-model", "--api-base", server.url + "/v1"]
        body, _ = await message_sent_in_console(
            tmp_path, model, "hello", lambda b: len(b["snapshot"]["messages"]) == 2
        )
        # Before, serve took no --model: its worker answered with the scripted demo model,
        # also a turn of a chat on a real model begun in the console or left by the chat.
        assert body["snapshot"]["messages"][-1]["text"] == ANSWER
        server.assert_script_used()
