"""Pieces read together become one delta, and a piece read alone is written before the next.

``BatchedOutput`` on its own, then ``LiteLLMModelClient`` against the loopback
provider: a stream sent in one burst, and one whose every event waits until
the client wrote the text before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import litellm
import pytest

from dex_agents.adapters.litellm.batched_output import BatchedOutput
from dex_agents.domain.model_io import ModelRequest, UserTextItem
from dex_agents.litellm import LiteLLMModelClient
from tests.adapters.litellm.provider_scripts import (
    Event,
    anthropic_stream,
    chat_stream,
    message_item,
    reasoning_item,
    responses_stream,
)
from tests.adapters.litellm.provider_server import ProviderServer, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput

litellm.suppress_debug_info = True

KEY = "tenant-key-0123456789abcdef"
ANSWER = "Order 7 left the depot this morning and arrives on Friday."
THOUGHT = "The user wants to know where order 7 is."
REQUEST = ModelRequest(instructions="You help.", items=(UserTextItem(text="Where is order 7?"),))


# ---------------------------------------------------------------------------
# BatchedOutput


async def test_pieces_of_one_loop_turn_are_one_write_made_on_the_next() -> None:
    output = RecordingOutput()
    batched = BatchedOutput(output)
    for piece in ("Order ", "7 ", "shipped."):
        batched.write_text_delta(piece)
    assert output.deltas == []  # nothing yet: more may come in this turn
    await asyncio.sleep(0)
    assert output.deltas == [("text", "Order 7 shipped.")]
    batched.write_text_delta(" Anything else?")
    await asyncio.sleep(0)
    assert output.deltas == [("text", "Order 7 shipped."), ("text", " Anything else?")]


async def test_the_halves_of_a_surrogate_pair_read_apart_are_written_as_one_character() -> None:
    # A provider slicing text by UTF-16 units sends an emoji's halves in two pieces.
    output = RecordingOutput()
    batched = BatchedOutput(output)
    batched.write_text_delta("Done \ud83d")
    await asyncio.sleep(0)
    assert output.deltas == [("text", "Done ")]  # the first half waits for the second
    batched.write_text_delta("\ude00 for now")
    await asyncio.sleep(0)
    batched.write_text_delta("\ud83d")
    batched.flush()  # the call's end writes a half whose other never came
    assert output.deltas == [("text", "Done "), ("text", "\U0001f600 for now"), ("text", "\ud83d")]


async def test_a_change_of_kind_writes_what_is_pending_first() -> None:
    output = RecordingOutput()
    batched = BatchedOutput(output)
    batched.write_reasoning_delta("Look ")
    batched.write_reasoning_delta("it up.")
    batched.write_text_delta("It ")
    batched.write_text_delta("shipped.")
    batched.write_reasoning_delta("Done.")
    await asyncio.sleep(0)
    assert output.deltas == [
        ("reasoning", "Look it up."),
        ("text", "It shipped."),
        ("reasoning", "Done."),
    ]


async def test_flush_writes_at_once_and_the_loop_writes_nothing_more() -> None:
    output = RecordingOutput()
    batched = BatchedOutput(output)
    batched.write_text_delta("Order ")
    batched.write_text_delta("7")
    batched.flush()
    assert output.deltas == [("text", "Order 7")]
    batched.flush()
    await asyncio.sleep(0)
    assert output.deltas == [("text", "Order 7")]  # no second write, no empty one


# ---------------------------------------------------------------------------
# The client, per API


def _responses(server: ProviderServer) -> LiteLLMModelClient:
    return LiteLLMModelClient(
        "openai/gpt-5-mini", api_base=server.url + "/v1", api_key_provider=lambda: KEY
    )


def _chat(server: ProviderServer) -> LiteLLMModelClient:
    return LiteLLMModelClient(
        "openai/gpt-4.1",
        api="chat_completions",
        api_base=server.url + "/v1",
        api_key_provider=lambda: KEY,
    )


def _anthropic(server: ProviderServer) -> LiteLLMModelClient:
    return LiteLLMModelClient(
        "anthropic/claude-sonnet-4-5", api_base=server.url, api_key_provider=lambda: KEY
    )


def _responses_events() -> list[Event]:
    return responses_stream(
        [reasoning_item("rs_1", THOUGHT, "encrypted=="), message_item("msg_1", ANSWER)]
    )


def _anthropic_events() -> list[Event]:
    blocks = [
        {"type": "thinking", "thinking": THOUGHT, "signature": "sig=="},
        {"type": "text", "text": ANSWER},
    ]
    return anthropic_stream(blocks)


def _streamed(event: Event) -> tuple[str, str] | None:
    """The ``(kind, text)`` an event of any of the three APIs streams, if any."""
    data: Any = event[1]
    if not isinstance(data, dict):
        return None
    kind = data.get("type")
    if kind == "response.output_text.delta":
        return ("text", data["delta"])
    if kind == "response.reasoning_summary_text.delta":
        return ("reasoning", data["delta"])
    if kind == "content_block_delta":
        delta = data["delta"]
        if delta["type"] == "text_delta":
            return ("text", delta["text"])
        if delta["type"] == "thinking_delta":
            return ("reasoning", delta["thinking"])
        return None
    for choice in data.get("choices", ()):
        if choice["delta"].get("content"):
            return ("text", choice["delta"]["content"])
    return None


Api = tuple[Callable[[ProviderServer], LiteLLMModelClient], Callable[[], list[Event]], bool]
APIS: dict[str, Api] = {
    # client, the stream of THOUGHT and ANSWER, whether it streams the reasoning
    "responses": (_responses, _responses_events, True),
    "chat_completions": (_chat, lambda: chat_stream(ANSWER), False),
    "anthropic": (_anthropic, _anthropic_events, True),
}


@pytest.mark.parametrize("api", sorted(APIS))
async def test_a_stream_sent_at_once_is_one_delta_of_each_kind(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    client, events, reasons = APIS[api]
    streamed = [piece for piece in map(_streamed, events()) if piece is not None]
    assert len(streamed) > 10  # the provider sends the answer a word at a time
    server.script(sse_reply(events()))
    response = await client(server).call_model(REQUEST, output)
    assert response.text == ANSWER
    assert output.deltas == ([("reasoning", THOUGHT)] if reasons else []) + [("text", ANSWER)]


@pytest.mark.parametrize("api", sorted(APIS))
async def test_a_piece_that_comes_alone_is_written_before_the_next_is_sent(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    client, events, _ = APIS[api]
    stream = events()

    def waiting_for_the_client(sent: Sequence[Event]) -> Callable[[int], Awaitable[None]]:
        async def before_event(index: int) -> None:
            # Every piece sent so far must reach the writer while the client waits.
            written = [piece for piece in map(_streamed, sent[:index]) if piece is not None]
            for kind in ("text", "reasoning"):
                await output.wait_for("".join(text for k, text in written if k == kind), kind)

        return before_event

    server.script(sse_reply(stream, before_event=waiting_for_the_client(stream)))
    response = await asyncio.wait_for(client(server).call_model(REQUEST, output), 30)
    assert response.text == ANSWER
    assert output.deltas == [piece for piece in map(_streamed, stream) if piece is not None]
