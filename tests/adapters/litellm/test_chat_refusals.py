"""A refusal OpenAI's Chat Completions streams (``delta.refusal``): it is the model's answer.

OpenAI streams a model's refusal to answer (with structured outputs, say) in
``delta.refusal`` pieces, not ``content``. LiteLLM (1.105) drops them from its
chunks, so the answer read as an empty one: the user saw nothing of it. The
body watch keeps them; the answer's text is the refusal, and its item replays
it as the ``refusal`` the model sent (which a replay to OpenAI leaves out, as
it does any answer without content or tool calls; another provider reads the
answer's text).
"""

from __future__ import annotations

import json
from dataclasses import replace

import litellm
import pytest

from dex_agents.domain.model_io import ModelRequest, UserTextItem
from tests.adapters.litellm.provider_scripts import Event, chat_reply, chat_stream
from tests.adapters.litellm.provider_server import ProviderServer, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.test_client_errors import REQUEST, clients

litellm.suppress_debug_info = True

REFUSAL = "I'm sorry, I can't help with that."


def _refusal_stream() -> list[Event]:
    events = chat_stream(None)
    first: dict[str, object] = events[0][1]
    pieces = [REFUSAL[:9], REFUSAL[9:]]
    refused = [
        (None, {**first, "choices": [{"index": 0, "delta": {"refusal": p}, "finish_reason": None}]})
        for p in pieces
    ]
    return [events[0], *refused, *events[1:]]


@pytest.mark.parametrize("compression", [None, "gzip"])
async def test_a_streamed_refusal_is_the_answers_text(
    server: ProviderServer, output: RecordingOutput, compression: str | None
) -> None:
    server.script(replace(sse_reply(_refusal_stream()), compression=compression))
    response = await clients(server)["chat"].call_model(REQUEST, output)
    assert response.text == REFUSAL
    assert output.text() == REFUSAL
    (item,) = response.output
    assert json.loads(item.item) == {"role": "assistant", "content": None, "refusal": REFUSAL}
    server.assert_script_used()


async def test_a_refusal_is_left_out_of_the_replay_to_openai(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # OpenAI refuses an assistant message without content or tool calls, and the
    # refusal field does not count (``chat_request.replayed_chat_message``).
    server.script(sse_reply(_refusal_stream()), chat_reply("Order 7 is late."))
    client = clients(server)["chat"]
    first = await client.call_model(REQUEST, output)
    follow_up = ModelRequest(
        instructions="Be brief.",
        items=(*REQUEST.items, *first.output, UserTextItem(text="Where is order 7?")),
    )
    await client.call_model(follow_up, output)
    sent = server.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "user"]
    server.assert_script_used()
