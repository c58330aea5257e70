"""A model served on loopback whose answer pauses mid-stream, and the chat in a
pseudo-terminal on it, for what a person does in ``dex-agents chat`` while a turn runs.

The model is a ``ProviderServer`` in a thread of its own; its first answer waits
before one of its events until the test lets it go on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.adapters.litellm.provider_scripts import chat_reply, chat_stream
from tests.adapters.litellm.provider_server import ProviderServer, sse_reply
from tests.cli.cli_support import DEADLINE_SECONDS
from tests.cli.pty_support import Terminal

ANSWER = "Order 7 shipped on Monday and arrives on Friday."
PAUSED_AFTER = "agent> Order 7 shipped "


@dataclass
class PausedModel:
    """A model whose first answer (``ANSWER``) stops after ``PAUSED_AFTER`` until ``go_on``."""

    server: ProviderServer
    loop: asyncio.AbstractEventLoop
    gate: asyncio.Event

    def go_on(self) -> None:
        self.loop.call_soon_threadsafe(self.gate.set)

    def env(self) -> dict[str, str]:
        return {
            "DEX_AGENTS_MODEL": "hosted_vllm/my-model",
            "DEX_AGENTS_API_BASE": self.server.url + "/v1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }


@contextmanager
def paused_model(*later: str, answer: str = ANSWER, pause_at: int = 4) -> Iterator[PausedModel]:
    """The model; ``later`` are its next answers, each sent at once. Its first,
    ``answer``, pauses before its event ``pause_at`` (0 is the role, then one word each)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="provider", daemon=True)
    thread.start()

    async def start() -> PausedModel:
        gate = asyncio.Event()

        async def before_event(index: int) -> None:
            if index == pause_at:  # by default after "Order ", "7 ", "shipped "
                await gate.wait()

        server = ProviderServer()
        server.script(sse_reply(chat_stream(answer), before_event=before_event))
        server.script(*(chat_reply(text) for text in later))
        await server.__aenter__()
        return PausedModel(server, loop, gate)

    model = asyncio.run_coroutine_threadsafe(start(), loop).result(DEADLINE_SECONDS)
    try:
        yield model
    finally:
        model.go_on()
        stop = model.server.__aexit__(None, None, None)
        asyncio.run_coroutine_threadsafe(stop, loop).result(DEADLINE_SECONDS)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(DEADLINE_SECONDS)
        loop.close()


@contextmanager
def chat_mid_turn(tmp_path: Path, *later: str) -> Iterator[tuple[Terminal, PausedModel]]:
    """The chat, its first message sent and the model's answer paused mid-stream."""
    with paused_model(*later) as model, Terminal(tmp_path, env=model.env()) as chat:
        chat.expect("you> ")
        chat.send("where is order 7?")
        chat.expect(PAUSED_AFTER)
        yield chat, model
