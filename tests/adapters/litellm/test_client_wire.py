"""``LiteLLMModelClient`` against a provider on loopback: the exact bodies LiteLLM sends.

Each test scripts the provider's answers, makes real calls through LiteLLM, and
reads the requests the provider received.
"""

from __future__ import annotations

import json
from typing import Any

import litellm
import pytest

from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelRequest,
    ModelToolDefinition,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.usage import AgentUsage
from dex_agents.litellm import LiteLLMModelClient
from tests.adapters.litellm.provider_scripts import (
    anthropic_reply,
    chat_reply,
    function_call_item,
    message_item,
    reasoning_item,
    responses_reply,
)
from tests.adapters.litellm.provider_server import ProviderServer
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.request_cases import IMAGE_BYTES, PNG, PNG_IMAGE, PNG_URL

litellm.suppress_debug_info = True  # LiteLLM prints a banner for models it has no price for

KEY = "tenant-key-0123456789abcdef"
ENCRYPTED = "gAAAAABo+encrypted/reasoning==\u00e9"
SIGNATURE = "EqQBCkYIBxgCKkB+signature/=="
LOOKUP = ModelToolDefinition(
    name="lookup",
    description="Look an order up.",
    parameters_schema={
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
)
USER = UserTextItem(text="Where is order 7?")


def openai_client(server: ProviderServer, **options: Any) -> LiteLLMModelClient:
    return LiteLLMModelClient(
        "openai/gpt-5-mini", api_base=server.url + "/v1", api_key_provider=lambda: KEY, **options
    )


def anthropic_client(server: ProviderServer) -> LiteLLMModelClient:
    async def key() -> str:
        return KEY

    return LiteLLMModelClient(
        "anthropic/claude-sonnet-4-5", api_base=server.url, api_key_provider=key
    )


def request(*items: ModelInputItem, **fields: Any) -> ModelRequest:
    return ModelRequest(
        instructions="You help with orders.",
        items=items,
        tools=(LOOKUP,),
        image_bytes=IMAGE_BYTES,
        **fields,
    )


def screenshot_result(call_id: str) -> ToolResultItem:
    return ToolResultItem(
        tool_call_id=call_id, tool_name="lookup", output="order 7 shipped", images=(PNG_IMAGE,)
    )


async def test_responses_api_call_and_byte_exact_replay(
    server: ProviderServer, output: RecordingOutput
) -> None:
    reasoning = reasoning_item("rs_1", "Looking the order up.", ENCRYPTED)
    call = function_call_item("fc_1", "call_1", "lookup", '{"order_id":"7"}')
    server.script(
        responses_reply([reasoning, call]),
        responses_reply([message_item("msg_2", "Order 7 shipped today.")], response_id="resp_2"),
    )
    client = openai_client(server)
    first = await client.call_model(request(USER), output)
    assert server.requests[0].path == "/v1/responses"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert server.requests[0].body == {
        "model": "gpt-5-mini",
        "input": [{"role": "user", "content": "Where is order 7?"}],
        "instructions": "You help with orders.",
        "tools": [
            {
                "type": "function",
                "name": "lookup",
                "description": "Look an order up.",
                "parameters": dict(LOOKUP.parameters_schema),
                "strict": False,
            }
        ],
        "tool_choice": "auto",
        "include": ["reasoning.encrypted_content"],
        "store": False,
        "stream": True,
    }
    assert [json.loads(item.item) for item in first.output] == [reasoning, call]
    assert first.tool_calls[0].arguments == '{"order_id":"7"}'
    assert first.usage == AgentUsage(
        model_calls=1,
        input_tokens=120,
        output_tokens=30,
        cached_input_tokens=20,
        reasoning_tokens=12,
    )
    metadata = first.model_call_metadata
    assert metadata is not None
    assert (metadata.request_model, metadata.response_model, metadata.provider_name) == (
        "openai/gpt-5-mini",
        "gpt-5-mini-2025-08-07",
        "openai",
    )
    assert (metadata.response_id, metadata.finish_reasons) == ("resp_1", ("completed",))
    # The provider sends the summary a word at a time, in one burst: one delta.
    assert output.deltas == [("reasoning", "Looking the order up.")]

    second = await client.call_model(
        request(USER, *first.output, screenshot_result("call_1")), output
    )
    sent = server.requests[1].body["input"]
    assert sent[1] == reasoning  # encrypted content byte for byte
    assert sent[1]["encrypted_content"] == ENCRYPTED
    assert sent[2] == call
    assert sent[3] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_text", "text": "order 7 shipped"},
            {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        ],
    }
    assert second.text == "Order 7 shipped today."
    assert output.text() == "Order 7 shipped today."
    server.assert_script_used()


async def test_chat_completions_tool_images_follow_in_a_user_message(
    server: ProviderServer, output: RecordingOutput
) -> None:
    server.script(
        chat_reply("Let me check.", [("call_9", "lookup", '{"order_id": "7"}')]),
        chat_reply("It shipped."),
    )
    client = LiteLLMModelClient(
        "openai/gpt-4.1",
        api="chat_completions",
        api_base=server.url + "/v1",
        api_key_provider=lambda: KEY,
        request_options={"temperature": 0},
    )
    first = await client.call_model(request(USER), output)
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].body == {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You help with orders."},
            {"role": "user", "content": "Where is order 7?"},
        ],
        "temperature": 0,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Look an order up.",
                    "parameters": dict(LOOKUP.parameters_schema),
                },
            }
        ],
        "tool_choice": "auto",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    (item,) = first.output
    assert (item.provider, item.api, item.text) == ("openai", "chat_completions", "Let me check.")
    assert first.usage == AgentUsage(
        model_calls=1, input_tokens=80, output_tokens=9, cached_input_tokens=16
    )
    await client.call_model(request(USER, item, screenshot_result("call_9")), output)
    assert server.requests[1].body["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"order_id": "7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "order 7 shipped"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "The lookup tool call call_9 returned these images."},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
            ],
        },
    ]
    assert output.text() == "Let me check.It shipped."
    server.assert_script_used()


THINKING = {"type": "thinking", "thinking": "The user wants order 7.", "signature": SIGNATURE}
REDACTED_THINKING = {"type": "redacted_thinking", "data": "EmwKAhgBEgy+redacted=="}


async def test_anthropic_thinking_signatures_replay_byte_for_byte(
    server: ProviderServer, output: RecordingOutput
) -> None:
    server.script(
        anthropic_reply(
            [
                THINKING,
                REDACTED_THINKING,
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order_id": "7"}},
            ]
        ),
        anthropic_reply([{"type": "text", "text": "It shipped."}]),
    )
    client = anthropic_client(server)
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    first = await client.call_model(request(USER, settings=thinking), output)
    assert server.requests[0].path == "/v1/messages"
    assert server.requests[0].headers["x-api-key"] == KEY
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Where is order 7?"}]}
    ]
    assert body["system"] == [{"type": "text", "text": "You help with orders."}]
    assert body["tools"][0]["name"] == "lookup"
    assert body["tools"][0]["input_schema"] == dict(LOOKUP.parameters_schema)
    (item,) = first.output
    stored = json.loads(item.item)
    assert stored["thinking_blocks"] == [THINKING, REDACTED_THINKING]
    assert (item.text, item.reasoning) == ("Checking.", "The user wants order 7.")
    assert first.usage == AgentUsage(
        model_calls=1,
        input_tokens=60,
        output_tokens=25,
        cached_input_tokens=10,
        reasoning_tokens=first.usage.reasoning_tokens,
    )
    assert output.text("reasoning") == "The user wants order 7."
    assert output.text() == "Checking."

    await client.call_model(
        request(USER, item, screenshot_result("toolu_1"), settings=thinking), output
    )
    assert server.requests[1].body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                THINKING,
                REDACTED_THINKING,
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order_id": "7"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "order 7 shipped"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": PNG_URL.split(",", 1)[1],
                            },
                        },
                    ],
                }
            ],
        },
    ]
    server.assert_script_used()


async def test_another_providers_items_replay_as_text_and_calls(
    server: ProviderServer, output: RecordingOutput
) -> None:
    server.script(
        anthropic_reply(
            [
                THINKING,
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order_id": "7"}},
            ]
        ),
        responses_reply([message_item("msg_1", "Shipped.")]),
    )
    first = await anthropic_client(server).call_model(request(USER), output)
    result = ToolResultItem(tool_call_id="toolu_1", tool_name="lookup", output="shipped")
    await openai_client(server).call_model(request(USER, *first.output, result), output)
    assert server.requests[1].body["input"] == [
        {"role": "user", "content": "Where is order 7?"},
        {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "lookup",
            "arguments": '{"order_id": "7"}',
        },
        {"type": "function_call_output", "call_id": "toolu_1", "output": "shipped"},
    ]
    server.assert_script_used()


def test_repr_shows_no_secret() -> None:
    client = LiteLLMModelClient(
        "openai/gpt-5-mini",
        api_base="https://proxy-user:proxy-password@llm.example.com/v1?key=abc123",
        api_key_provider=lambda: KEY,
        request_options={"timeout": 30},
    )
    shown = repr(client)
    assert shown == (
        "LiteLLMModelClient(model='openai/gpt-5-mini', api='responses', "
        "api_base='https://[redacted]@llm.example.com/v1?key=[redacted]', "
        "api_key_provider=<set>, request_options=['timeout'])"
    )
    assert "proxy-password" not in shown
    assert "abc123" not in shown


def test_the_client_refuses_what_it_cannot_send() -> None:
    with pytest.raises(ValueError, match="LiteLLM names no provider for model 'not-a-model'"):
        LiteLLMModelClient("not-a-model")
    with pytest.raises(ValueError, match="request_options may not set 'stream'"):
        LiteLLMModelClient("openai/gpt-5", request_options={"stream": False})
    with pytest.raises(ValueError, match=r"^model 'openai/' names no model after its provider$"):
        LiteLLMModelClient("openai/")
    with pytest.raises(TypeError, match=r"^request_options must be a mapping, not str$"):
        LiteLLMModelClient("openai/gpt-5", request_options="timeout")  # type: ignore[arg-type]
    # No scheme, another scheme, no host, no port: each failed every call as a retryable
    # "HTTP 500", and the HTTP client's error quoted the URL's query.
    for api_base in (
        "localhost:8000/v1?key=abcdefgh123",
        "ftp://h/v1",
        "http:///v1",
        "http://h:99999",
    ):
        with pytest.raises(
            ValueError, match=r"^api_base must be an http:// or https:// URL"
        ) as bad:
            LiteLLMModelClient("openai/gpt-5", api_base=api_base)
        assert "abcdefgh123" not in str(bad.value)
    with pytest.raises(ValueError, match="request_options may not set 'custom_llm_provider'"):
        LiteLLMModelClient("anthropic/claude", request_options={"custom_llm_provider": "openai"})
    with pytest.raises(ValueError, match="may not hold the credential 'api_key'"):
        LiteLLMModelClient("openai/gpt-5", request_options={"api_key": KEY})
    with pytest.raises(TypeError, match="api_key_provider must be callable"):
        LiteLLMModelClient("openai/gpt-5", api_key_provider=KEY)  # type: ignore[arg-type]


def test_forced_tool_choice_and_estimate_through_the_client() -> None:
    claude = LiteLLMModelClient(
        "anthropic/claude-sonnet-4-5", request_options={"reasoning_effort": "low"}
    )
    assert claude.supports_forced_tool_choice({}) is False
    assert claude.supports_forced_tool_choice({"reasoning_effort": "none"}) is True
    gpt = LiteLLMModelClient("openai/gpt-5-mini")
    assert gpt.supports_forced_tool_choice({"reasoning_effort": "high"}) is True
    with_image = ModelRequest(instructions="", items=(UserTextItem(text="", images=(PNG_IMAGE,)),))
    assert gpt.estimate_input_tokens(with_image) == 1600
    assert len(PNG) < 100


async def test_calls_leave_the_settings_and_request_options_as_given(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # LiteLLM writes its timings into a metadata dict it is given, one more each call.
    options = {"metadata": {"team": "support"}, "extra_headers": {"x-team": "support"}}
    settings = {"metadata": {"tenant": "t1"}, "reasoning": {"effort": "low"}}
    responses = openai_client(server, request_options=options)
    chat = LiteLLMModelClient(
        "anthropic/claude-sonnet-4-5",
        api_base=server.url,
        api_key_provider=lambda: KEY,
        request_options=options,
    )
    server.script(
        responses_reply([message_item("msg_1", "One.")]),
        responses_reply([message_item("msg_2", "Two.")]),
        anthropic_reply([{"type": "text", "text": "Three."}]),
    )
    await responses.call_model(request(USER, settings=settings), output)
    await responses.call_model(request(USER, settings=settings), output)
    await chat.call_model(request(USER), output)  # the request options' metadata
    assert options == {"metadata": {"team": "support"}, "extra_headers": {"x-team": "support"}}
    assert settings == {"metadata": {"tenant": "t1"}, "reasoning": {"effort": "low"}}
    assert [r.body["metadata"] for r in server.requests[:2]] == [{"tenant": "t1"}] * 2
    server.assert_script_used()


@pytest.mark.parametrize(
    ("settings", "sent"),
    [
        ({"max_tokens": 700}, {"max_output_tokens": 700}),
        ({"max_completion_tokens": 700}, {"max_output_tokens": 700}),
        ({"max_tokens": 700, "max_output_tokens": 300}, {"max_output_tokens": 300}),
        (
            {"reasoning_effort": "high", "reasoning": {"summary": "auto"}},
            {"reasoning": {"summary": "auto", "effort": "high"}},
        ),
        (
            {"reasoning_effort": "high", "reasoning": {"effort": "low"}},
            {"reasoning": {"effort": "low"}},
        ),
    ],
)
async def test_chat_completions_settings_keep_their_effect_on_the_responses_api(
    server: ProviderServer,
    output: RecordingOutput,
    settings: dict[str, Any],
    sent: dict[str, Any],
) -> None:
    # LiteLLM's Responses call drops these silently; the same settings work on every route.
    server.script(responses_reply([message_item("msg_1", "Hi.")]))
    await openai_client(server).call_model(request(USER, settings=settings), output)
    body = server.requests[0].body
    assert {key: body.get(key) for key in sent} == sent
    assert "max_tokens" not in body
    assert "reasoning_effort" not in body
    server.assert_script_used()
