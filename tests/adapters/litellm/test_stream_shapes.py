"""Answers real providers stream in shapes the happy path does not: each is read whole.

A Responses stream whose ``response.completed`` holds an empty ``output`` (as
ChatGPT's Codex endpoint and some gateways send it) keeps the items its
``response.output_item.done`` events streamed, and one whose done events and
completed output number the items apart (LiteLLM's bridge to another
provider) holds each item once. A surrogate pair a provider
splits across two pieces (slicing text by UTF-16 units, as JavaScript does) is
read as the one character it encodes. A Responses call with empty arguments
has the empty object, as on Chat Completions. A Responses event without a
``type`` fails the call with a ``ModelProviderError`` that says so, or with the
error it holds.
"""

from __future__ import annotations

import json
from typing import Any

import litellm
import pytest

from dex_agents.adapters.litellm.responses_output import answer_items
from dex_agents.domain.model_io import ModelToolCall
from dex_agents.litellm import LiteLLMModelClient, ModelProviderError, ModelStreamInterruptedError
from tests.adapters.litellm.provider_scripts import (
    Event,
    anthropic_stream,
    chat_stream,
    function_call_item,
    gemini_reply,
    message_item,
    reasoning_item,
    responses_stream,
)
from tests.adapters.litellm.provider_server import ProviderServer, frames_reply, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.test_client_errors import KEY, REQUEST, clients

litellm.suppress_debug_info = True


async def test_a_completed_response_with_empty_output_keeps_the_streamed_items(
    server: ProviderServer, output: RecordingOutput
) -> None:
    items = [
        reasoning_item("rs_1", "Look it up.", "enc-1"),
        message_item("msg_1", "Checking."),
        function_call_item("fc_1", "call_1", "lookup", '{"order": 7}'),
    ]
    events = responses_stream(items)
    _, completed = events[-1]
    completed["response"]["output"] = []
    server.script(sse_reply(events))
    response = await clients(server)["responses"].call_model(REQUEST, output)
    assert [json.loads(item.item) for item in response.output] == items
    assert response.text == "Checking."
    assert response.output[2].tool_calls == (
        ModelToolCall(tool_call_id="call_1", tool_name="lookup", arguments='{"order": 7}'),
    )
    server.assert_script_used()


async def test_a_streamed_item_the_completed_output_leaves_out_keeps_its_place(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # A source whose completed output lists the call but not the reasoning before
    # it: the reasoning was appended after the call, replayed out of the model's order.
    items = [
        reasoning_item("rs_1", "Look it up.", "enc-1"),
        function_call_item("fc_1", "call_1", "lookup", '{"order": 7}'),
    ]
    events = responses_stream(items)
    _, completed = events[-1]
    completed["response"]["output"] = items[1:]
    server.script(sse_reply(events))
    response = await clients(server)["responses"].call_model(REQUEST, output)
    assert [json.loads(item.item) for item in response.output] == items
    server.assert_script_used()


HIGH, LOW = "\ud83d", "\ude00"  # the UTF-16 halves of U+1F600, as a JavaScript slice sends them


def _chat_events_with_split_pairs() -> list[Event]:
    events = chat_stream("Done ", [("call_1", "note", "")])
    first: dict[str, Any] = events[0][1]

    def chunk(delta: dict[str, Any]) -> Event:
        return (None, {**first, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})

    def arguments(part: str) -> Event:
        return chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})

    text = [chunk({"content": HIGH}), chunk({"content": LOW})]
    split_arguments = [arguments('{"text": "' + HIGH), arguments(LOW + '"}')]
    # The call's first chunk, then its two halves of (empty) arguments, which the split replace.
    start = next(i for i, (_, data) in enumerate(events) if "tool_calls" in str(data))
    return [*events[:start], *text, events[start], *split_arguments, *events[start + 3 :]]


def _anthropic_events_with_split_pairs() -> list[Event]:
    events = anthropic_stream(
        [
            {"type": "text", "text": "Done " + HIGH + LOW},
            {"type": "tool_use", "id": "toolu_1", "name": "note", "input": {}},
        ]
    )
    split: list[Event] = []
    for name, data in events:
        delta = data.get("delta", {})
        if delta.get("text") == HIGH + LOW:
            split += [(name, {**data, "delta": {**delta, "text": half}}) for half in (HIGH, LOW)]
        elif delta.get("type") == "input_json_delta":
            parts = ('{"text": "' + HIGH, LOW + '"}')
            split += [(name, {**data, "delta": {**delta, "partial_json": p}}) for p in parts]
        else:
            split.append((name, data))
    return split


@pytest.mark.parametrize("api", ["chat", "anthropic"])
async def test_a_surrogate_pair_split_across_pieces_is_read_as_its_character(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    # Each piece's JSON escape decodes to a lone surrogate; only joined are they U+1F600.
    events = (
        _chat_events_with_split_pairs() if api == "chat" else _anthropic_events_with_split_pairs()
    )
    server.script(sse_reply(events))
    response = await clients(server)[api].call_model(REQUEST, output)
    assert response.text == "Done \U0001f600"
    (call,) = response.output[0].tool_calls
    assert json.loads(call.arguments) == {"text": "\U0001f600"}
    assert "\U0001f600" in response.output[0].item
    server.assert_script_used()


async def test_a_responses_call_with_empty_arguments_has_the_empty_object(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # An OpenAI-compatible server may stream a call of a tool without parameters
    # with "", which is not JSON: the tool failed with "arguments are not valid JSON".
    item = function_call_item("fc_1", "call_1", "now", "")
    server.script(sse_reply(responses_stream([item])))
    response = await clients(server)["responses"].call_model(REQUEST, output)
    (answer,) = response.output
    assert answer.tool_calls == (
        ModelToolCall(tool_call_id="call_1", tool_name="now", arguments="{}"),
    )
    assert json.loads(answer.item) == item  # replayed as the provider sent it
    server.assert_script_used()


CONTEXT = "This model's maximum context length is 128000 tokens."


@pytest.mark.parametrize(
    ("event", "error", "message", "retryable"),
    [
        (
            {"sequence_number": 1, "delta": "Hel"},
            ModelProviderError,
            "openai model call failed: the provider sent a Responses API stream event "
            "without a type (its fields: delta, sequence_number)",
            False,
        ),
        (
            {"type": None, "delta": "Hel"},
            ModelProviderError,
            "openai model call failed: the provider sent a Responses API stream event "
            "without a type (its fields: delta, type)",
            False,
        ),
        # An error a gateway sends as an event without a type is the provider's error.
        (
            {"error": {"message": CONTEXT, "code": "context_length_exceeded"}},
            ModelProviderError,
            f"openai model call failed: {CONTEXT}",
            False,
        ),
        (
            {"error": {"message": "Rate limit reached.", "code": "rate_limit_exceeded"}},
            ModelStreamInterruptedError,
            "the openai stream broke before the answer ended: Rate limit reached.",
            True,
        ),
    ],
    ids=["fields", "null-type", "error", "retryable-error"],
)
async def test_a_responses_event_without_a_type_fails_the_call_clearly(
    server: ProviderServer,
    output: RecordingOutput,
    event: dict[str, Any],
    error: type[ModelProviderError],
    message: str,
    retryable: bool,
) -> None:
    # LiteLLM passes such an event on without a ``type``: reading it raised a bare
    # AttributeError, which no retry policy or error text of the client covered.
    events = responses_stream([message_item("msg_1", "Hello there.")])
    events.insert(2, (None, event))
    server.script(sse_reply(events))
    with pytest.raises(ModelProviderError) as caught:
        await clients(server)["responses"].call_model(REQUEST, output)
    assert type(caught.value) is error
    assert (str(caught.value), caught.value.retryable) == (message, retryable)
    assert caught.value.status_code is None
    server.assert_script_used()


GEMINI_CALLS = [
    {"functionCall": {"name": "lookup", "args": {"order_id": "7"}}},
    {"functionCall": {"name": "lookup", "args": {"order_id": "8"}}},
]


@pytest.mark.parametrize("calls", [GEMINI_CALLS[:1], GEMINI_CALLS], ids=["one-call", "two-calls"])
async def test_a_responses_answer_of_tool_calls_alone_holds_each_call_once(
    server: ProviderServer, output: RecordingOutput, calls: list[dict[str, Any]]
) -> None:
    # LiteLLM's Responses API over another provider's Chat Completions streams the
    # calls' done events from output index 1 (it keeps 0 for a message that never
    # came) and lists them from 0 in the completed response: merged by index, the
    # first call was there twice, under two IDs, and ran twice.
    server.script(gemini_reply(calls))
    client = LiteLLMModelClient(
        "gemini/gemini-2.5-pro", api="responses", api_base=server.url, api_key_provider=lambda: KEY
    )
    response = await client.call_model(REQUEST, output)
    assert [json.loads(call.arguments) for call in response.tool_calls] == [
        call["functionCall"]["args"] for call in calls
    ]
    assert [json.loads(item.item)["type"] for item in response.output] == ["function_call"] * len(
        calls
    )
    server.assert_script_used()


def _item(
    item_id: str | None, name: str, kind: str = "function_call", call_id: str | None = None
) -> dict[str, Any]:
    return (
        {"type": kind, "name": name}
        | ({} if item_id is None else {"id": item_id})
        | ({} if call_id is None else {"call_id": call_id})
    )


A, B, C = _item("fc_a", "a"), _item("fc_b", "b"), _item("fc_c", "c")


@pytest.mark.parametrize(
    ("streamed", "final", "names"),
    [
        ({0: A, 1: B}, [A, B], ["a", "b"]),
        ({1: A, 2: B}, [A, B], ["a", "b"]),  # LiteLLM's bridge: streamed from index 1
        ({0: A, 1: B}, [], ["a", "b"]),  # an empty completed output
        ({}, [A, B], ["a", "b"]),  # no done events
        ({1: B}, [A, B], ["a", "b"]),  # A's done event never came
        ({1: A}, [A, B], ["a", "b"]),  # B's never came, and its index is A's
        ({0: A, 1: C}, [A, B], ["a", "b", "c"]),  # C is not listed: it follows
        ({0: _item(None, "x"), 1: B}, [_item(None, "y"), B], ["x", "b"]),  # no id: by index
        ({0: A}, [_item(None, "y")], ["a"]),  # either without an id: by index
        # Two items under one ID: each streamed one stands for one listed one, in order.
        ({0: _item("fc_a", "a1"), 1: _item("fc_a", "a2")}, [A, A], ["a1", "a2"]),
        # An item without an ID is not matched by index to one another item's ID claims.
        ({0: B, 1: A}, [_item(None, "y"), B, A], ["y", "b", "a"]),
        # A call whose ID only its done event holds is matched by its call ID.
        ({1: _item("fc_a", "a", call_id="call_a")}, [_item(None, "y", call_id="call_a")], ["a"]),
        # Not by index to an item of another kind.
        ({0: _item(None, "r", "reasoning")}, [_item(None, "m", "message")], ["m", "r"]),
        # A streamed item the completed output leaves out keeps its place.
        ({0: _item("rs_1", "r", "reasoning"), 1: A}, [A], ["r", "a"]),
        ({0: A, 1: _item("rs_1", "r", "reasoning"), 2: B}, [A, B], ["a", "r", "b"]),
    ],
    ids=[
        "aligned",
        "shifted",
        "empty-output",
        "no-done-events",
        "missing-first",
        "missing-second",
        "unlisted",
        "no-ids",
        "final-without-id",
        "repeated-id",
        "crossed",
        "call-id",
        "other-kind",
        "unlisted-first",
        "unlisted-between",
    ],
)
def test_the_answers_items_are_the_completed_output_as_streamed(
    streamed: dict[int, dict[str, Any]], final: list[dict[str, Any]], names: list[str]
) -> None:
    assert [item["name"] for item in answer_items(streamed, final)] == names


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_a_body_that_is_no_utf_8_text_is_a_broken_stream(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    # Such as a body compressed in an encoding nothing here decodes (br, which
    # httpx without brotli neither asks for nor decodes). The OpenAI SDK's event
    # decoder raised a bare UnicodeDecodeError, which LiteLLM's Responses stream
    # passed on; its Chat Completions stream called it a break.
    server.script(frames_reply([b"data: \x80\x81 not text\n\n"], "text/event-stream"))
    with pytest.raises(ModelStreamInterruptedError) as caught:
        await clients(server)[api].call_model(REQUEST, output)
    assert str(caught.value).startswith(
        "the openai stream broke before the answer ended: 'utf-8' codec can't decode byte 0x80"
    )
    assert caught.value.retryable is True
    server.assert_script_used()
