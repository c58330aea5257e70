"""What a stored answer replays as, so that no stored item breaks a later request.

Tool call arguments that are not a JSON object (a call cut at the output token
limit, a model's bad JSON) replay as ``{}`` on every route, and a Chat
Completions answer with no text and no tool calls is left out, whether the item
replays exactly or as another provider's text and calls.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dex_agents.adapters.litellm.chat_request import chat_messages, replayed_chat_message
from dex_agents.adapters.litellm.replay import replayable_arguments
from dex_agents.adapters.litellm.responses_request import (
    replayed_responses_item,
    responses_input,
)
from dex_agents.adapters.litellm.routing import ModelRoute
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelRequest,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)
from tests.adapters.litellm.request_cases import (
    ANTHROPIC,
    BEDROCK,
    GEMINI,
    GEMINI_RESPONSES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    route,
)

AZURE = route("azure/my-gpt-4o", "azure", "my-gpt-4o")

CUT = '{"order_id": "7'


@pytest.mark.parametrize(
    ("arguments", "replayed"),
    [
        ('{"order_id":"7"}', '{"order_id":"7"}'),
        ('{ "order_id" : "7" }', '{ "order_id" : "7" }'),  # kept byte for byte
        ("{}", "{}"),
        (CUT, "{}"),
        ("", "{}"),
        ("   ", "{}"),
        ("not json", "{}"),
        ('{"order_id": "7"} trailing', "{}"),
        ('["7"]', "{}"),
        ('"7"', "{}"),
        ("7", "{}"),
        ("null", "{}"),
        ('{"limit": NaN}', "{}"),
        ('{"limit": Infinity}', "{}"),
        ("[" * 100_000, "{}"),
        (None, "{}"),
        ({"order_id": "7"}, "{}"),
    ],
)
def test_arguments_that_are_not_a_json_object_replay_as_an_empty_object(
    arguments: Any, replayed: str
) -> None:
    assert replayable_arguments(arguments) == replayed


def _chat_call(arguments: Any) -> dict[str, Any]:
    return {
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": arguments},
    }


@pytest.mark.parametrize(
    ("message", "replayed"),
    [
        (
            {"role": "assistant", "content": None, "tool_calls": [_chat_call(CUT)]},
            {"role": "assistant", "content": None, "tool_calls": [_chat_call("{}")]},
        ),
        (
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [_chat_call('{"order_id":"7"}'), _chat_call("[1]")],
                "thinking_blocks": [{"type": "thinking", "thinking": "Hm", "signature": "s=="}],
            },
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [_chat_call('{"order_id":"7"}'), _chat_call("{}")],
                "thinking_blocks": [{"type": "thinking", "thinking": "Hm", "signature": "s=="}],
            },
        ),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {**_chat_call(CUT), "provider_specific_fields": {"thought_signature": "t=="}}
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {**_chat_call("{}"), "provider_specific_fields": {"thought_signature": "t=="}}
                ],
            },
        ),
        (
            {"role": "assistant", "content": "Done.", "tool_calls": []},
            {"role": "assistant", "content": "Done.", "tool_calls": []},
        ),
    ],
    ids=["cut-call", "one-bad-of-two", "gemini-signature-kept", "no-calls"],
)
def test_a_chat_message_replays_with_arguments_every_route_reads(
    message: dict[str, Any], replayed: dict[str, Any]
) -> None:
    assert replayed_chat_message(message) == replayed


@pytest.mark.parametrize(
    ("item", "replayed"),
    [
        (
            {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": CUT},
            {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        ),
        (
            {"type": "function_call", "call_id": "c", "name": "lookup", "arguments": "{}"},
            {"type": "function_call", "call_id": "c", "name": "lookup", "arguments": "{}"},
        ),
        (
            {"type": "message", "role": "assistant", "content": [], "arguments": CUT},
            {"type": "message", "role": "assistant", "content": [], "arguments": CUT},
        ),
    ],
    ids=["cut-call", "good-call", "not-a-call"],
)
def test_a_responses_item_replays_with_arguments_every_route_reads(
    item: dict[str, Any], replayed: dict[str, Any]
) -> None:
    assert replayed_responses_item(item) == replayed


CUT_CALL = ModelToolCall(tool_call_id="toolu_1", tool_name="lookup", arguments=CUT)
RESULT = ToolResultItem(
    tool_call_id="toolu_1",
    tool_name="lookup",
    output="invalid arguments for lookup: arguments are not valid JSON",
)


def _cut_item(provider: str, api: str) -> ModelOutputItem:
    if api == "responses":
        data: dict[str, Any] = {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "lookup",
            "arguments": CUT,
        }
    else:
        data = {"role": "assistant", "content": None, "tool_calls": [_chat_call(CUT)]}
    return ModelOutputItem(
        item=json.dumps(data), provider=provider, api=api, tool_calls=(CUT_CALL,)
    )


def _request(*items: ModelInputItem) -> ModelRequest:
    return ModelRequest(instructions="", items=(UserTextItem(text="Where is order 7?"), *items))


def _sent_arguments(route: ModelRoute, item: ModelOutputItem) -> list[str]:
    request = _request(item, RESULT)
    if route.api == "responses":
        return [
            sent["arguments"]
            for sent in responses_input(request, route)
            if sent.get("type") == "function_call"
        ]
    return [
        call["function"]["arguments"]
        for message in chat_messages(request, route)
        for call in message.get("tool_calls", ())
    ]


@pytest.mark.parametrize(
    "route",
    [OPENAI_CHAT, ANTHROPIC, BEDROCK, GEMINI, OPENAI_RESPONSES, GEMINI_RESPONSES],
    ids=lambda route: f"{route.provider}-{route.api}",
)
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "foreign"])
def test_a_cut_call_replays_as_an_empty_object_on_every_route(
    route: ModelRoute, exact: bool
) -> None:
    provider = route.provider if exact else "other"
    assert _sent_arguments(route, _cut_item(provider, route.api)) == ["{}"]


THINKING = [{"type": "thinking", "thinking": "Hm", "signature": "s=="}]


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": None},
        {"role": "assistant"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": " \n"},
        {"role": "assistant", "content": []},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "assistant", "content": None, "thinking_blocks": THINKING},
        {"role": "assistant", "content": None, "reasoning_content": "Spent it all thinking."},
        {"role": "assistant", "content": "", "provider_specific_fields": {"refusal": None}},
    ],
    ids=[
        "null",
        "absent",
        "empty",
        "whitespace",
        "no-parts",
        "no-calls",
        "thinking-only",
        "reasoning-only",
        "provider-fields-only",
    ],
)
def test_an_answer_with_no_text_and_no_tool_calls_is_left_out(message: dict[str, Any]) -> None:
    assert replayed_chat_message(message) is None


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": "Hi."},
        {"role": "assistant", "content": None, "tool_calls": [_chat_call("{}")]},
        {"role": "assistant", "content": "", "tool_calls": [_chat_call("{}")]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
        {
            "role": "assistant",
            "content": None,
            "thinking_blocks": THINKING,
            "tool_calls": [_chat_call("{}")],
        },
    ],
    ids=["text", "call-only", "empty-text-and-call", "parts", "thinking-and-call"],
)
def test_an_answer_with_text_or_tool_calls_replays_as_stored(message: dict[str, Any]) -> None:
    assert replayed_chat_message(message) == message


EMPTY_JSON = '{"role":"assistant","content":null}'


@pytest.mark.parametrize(
    "route",
    [OPENAI_CHAT, AZURE, ANTHROPIC, BEDROCK, GEMINI],
    ids=lambda route: route.provider,
)
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "foreign"])
def test_an_empty_answer_sends_no_assistant_message_on_any_chat_route(
    route: ModelRoute, exact: bool
) -> None:
    empty = ModelOutputItem(
        item=EMPTY_JSON, provider=route.provider if exact else "other", api="chat_completions"
    )
    request = _request(empty, UserTextItem(text="Are you there?"))
    assert chat_messages(request, route) == [
        {"role": "user", "content": "Where is order 7?"},
        {"role": "user", "content": "Are you there?"},
    ]
