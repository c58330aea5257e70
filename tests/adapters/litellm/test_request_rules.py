"""How a ``ModelRequest`` becomes each API's input: text, tools, tool results, images, replays."""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents.adapters.litellm.chat_request import chat_arguments, chat_messages
from dex_agents.adapters.litellm.images import (
    ESTIMATED_IMAGE_INPUT_TOKENS,
    TOOL_RESULT_IMAGES_OMITTED_TEXT,
    TOOL_RESULT_IMAGES_TEXT,
    omitted_images_text,
)
from dex_agents.adapters.litellm.responses_request import responses_arguments, responses_input
from dex_agents.adapters.litellm.routing import ModelRoute
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelRequest,
    ModelToolCall,
    ModelToolChoice,
    ModelToolDefinition,
    ToolResultItem,
    UserTextItem,
)
from tests.adapters.litellm.request_cases import (
    ANTHROPIC,
    ANTHROPIC_ITEM,
    ANTHROPIC_JSON,
    BEDROCK,
    FUNCTION_CALL,
    FUNCTION_CALL_JSON,
    GEMINI,
    GEMINI_RESPONSES,
    IMAGE_BYTES,
    JPEG_IMAGE,
    JPEG_URL,
    MESSAGE,
    MESSAGE_JSON,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PNG_IMAGE,
    PNG_URL,
    REASONING,
    REASONING_JSON,
    VERTEX_CLAUDE,
)

LOOK = UserTextItem(text="Look at the home page.", images=(PNG_IMAGE,))
RESULT = ToolResultItem(
    tool_call_id="call_1",
    tool_name="screenshot",
    output="Took it.",
    images=(PNG_IMAGE, JPEG_IMAGE),
)
OMITTED_TWO = "Took it.\n\n[The tool returned 2 images; this model does not receive images from tool results.]"


def request(*items: ModelInputItem, **fields: Any) -> ModelRequest:
    return ModelRequest(instructions="Be brief.", items=items, image_bytes=IMAGE_BYTES, **fields)


def test_the_image_texts_and_estimate_are_pinned() -> None:
    assert ESTIMATED_IMAGE_INPUT_TOKENS == 1600
    assert (
        TOOL_RESULT_IMAGES_TEXT == "The {tool_name} tool call {tool_call_id} returned these images."
    )
    assert TOOL_RESULT_IMAGES_OMITTED_TEXT.format(image_count=2, image_noun="images") == (
        "[The tool returned 2 images; this model does not receive images from tool results.]"
    )
    assert omitted_images_text(1) == (
        "[The tool returned 1 image; this model does not receive images from tool results.]"
    )


def test_responses_input_replays_its_own_items_and_sends_images_in_parts() -> None:
    sent = responses_input(
        request(UserTextItem(text="Hi"), LOOK, REASONING, MESSAGE, FUNCTION_CALL, RESULT),
        OPENAI_RESPONSES,
    )
    assert sent == [
        {"role": "user", "content": "Hi"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look at the home page."},
                {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
            ],
        },
        REASONING_JSON,
        MESSAGE_JSON,
        FUNCTION_CALL_JSON,
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {"type": "input_text", "text": "Took it."},
                {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
                {"type": "input_image", "image_url": JPEG_URL, "detail": "auto"},
            ],
        },
    ]


def test_responses_input_replays_another_providers_item_as_text_and_calls() -> None:
    sent = responses_input(request(LOOK, ANTHROPIC_ITEM, RESULT), OPENAI_RESPONSES)
    assert sent[1:3] == [
        {"role": "assistant", "content": "Taking one."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "screenshot",
            "arguments": '{"page":"home"}',
        },
    ]
    assert "Need a screenshot" not in repr(sent)  # its reasoning is dropped


def test_gemini_on_the_responses_api_gets_no_tool_result_images() -> None:
    sent = responses_input(request(LOOK, FUNCTION_CALL, RESULT), GEMINI_RESPONSES)
    assert sent[0]["content"][1]["type"] == "input_image"  # user images still go
    # Another provider's function_call replays as a call; the result holds only text.
    assert sent[1] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "screenshot",
        "arguments": '{"page":"home"}',
    }
    assert sent[2] == {"type": "function_call_output", "call_id": "call_1", "output": OMITTED_TWO}


def _second_result(images: tuple[Any, ...] = ()) -> ToolResultItem:
    return ToolResultItem(tool_call_id="call_2", tool_name="lookup", output="ok", images=images)


TWO_CALLS = ANTHROPIC_ITEM  # replays as text and tool calls to every other route


@pytest.mark.parametrize("route", [OPENAI_CHAT, VERTEX_CLAUDE], ids=["openai", "vertex-claude"])
def test_text_only_tool_messages_get_follow_up_image_messages(route: ModelRoute) -> None:
    third = ToolResultItem(
        tool_call_id="call_3", tool_name="photo", output="", images=(JPEG_IMAGE,)
    )
    messages = chat_messages(request(TWO_CALLS, RESULT, _second_result(), third), route)
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "Took it."},
        {"role": "tool", "tool_call_id": "call_2", "content": "ok"},
        {"role": "tool", "tool_call_id": "call_3", "content": ""},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "The screenshot tool call call_1 returned these images."},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
                {"type": "image_url", "image_url": {"url": JPEG_URL}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "The photo tool call call_3 returned these images."},
                {"type": "image_url", "image_url": {"url": JPEG_URL}},
            ],
        },
    ]


@pytest.mark.parametrize("route", [ANTHROPIC, BEDROCK], ids=["anthropic", "bedrock"])
def test_anthropic_and_bedrock_tool_messages_carry_their_images(route: ModelRoute) -> None:
    messages = chat_messages(request(TWO_CALLS, RESULT, _second_result()), route)
    assert messages[2:] == [
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [
                {"type": "text", "text": "Took it."},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
                {"type": "image_url", "image_url": {"url": JPEG_URL}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "ok"},
    ]


def test_gemini_tool_messages_say_the_images_are_omitted() -> None:
    messages = chat_messages(request(LOOK, TWO_CALLS, RESULT), GEMINI)
    assert messages[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Look at the home page."},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ],
    }
    assert messages[3:] == [{"role": "tool", "tool_call_id": "call_1", "content": OMITTED_TWO}]


def test_chat_replays_its_own_message_with_thinking_signatures_unchanged() -> None:
    messages = chat_messages(request(LOOK, ANTHROPIC_ITEM, RESULT), ANTHROPIC)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[2] == ANTHROPIC_JSON


def test_chat_merges_another_apis_items_into_one_message_without_reasoning() -> None:
    other_call = ModelOutputItem(
        item="{}",
        provider="openai",
        api="responses",
        tool_calls=(ModelToolCall(tool_call_id="call_2", tool_name="lookup", arguments="{}"),),
    )
    messages = chat_messages(
        request(LOOK, REASONING, MESSAGE, FUNCTION_CALL, other_call, RESULT, _second_result()),
        ANTHROPIC,
    )
    assert messages[2] == {
        "role": "assistant",
        "content": "Taking one.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "screenshot", "arguments": '{"page":"home"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
        ],
    }
    assert [message["role"] for message in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
    ]


def test_a_missing_image_fails_the_call_before_any_request() -> None:
    bare = ModelRequest(instructions="", items=(LOOK,))
    with pytest.raises(
        LookupError, match=f"image bytes missing from the model request: {PNG_IMAGE.sha256}"
    ):
        chat_messages(bare, OPENAI_CHAT)
    with pytest.raises(LookupError, match=PNG_IMAGE.sha256):
        responses_input(bare, OPENAI_RESPONSES)


TOOL = ModelToolDefinition(
    name="lookup",
    description="Look an order up.",
    parameters_schema={"type": "object", "properties": {"order_id": {"type": "string"}}},
)


def test_responses_arguments_store_nothing_and_ask_for_encrypted_reasoning() -> None:
    arguments = responses_arguments(
        request(UserTextItem(text="Hi"), tools=(TOOL,), max_output_tokens=500),
        OPENAI_RESPONSES,
        {"reasoning": {"effort": "low", "summary": "auto"}},
    )
    assert arguments == {
        "reasoning": {"effort": "low", "summary": "auto"},
        "model": "openai/gpt-5-mini",
        "input": [{"role": "user", "content": "Hi"}],
        "instructions": "Be brief.",
        "tools": [
            {
                "type": "function",
                "name": "lookup",
                "description": "Look an order up.",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                "strict": False,
            }
        ],
        "tool_choice": "auto",
        "max_output_tokens": 500,
        "include": ["reasoning.encrypted_content"],
        "store": False,
        "stream": True,
    }


def test_chat_arguments_stream_with_usage_and_force_a_tool_when_asked() -> None:
    arguments = chat_arguments(
        request(UserTextItem(text="Hi"), tools=(TOOL,), tool_choice=ModelToolChoice.REQUIRED),
        ANTHROPIC,
        {"thinking": {"type": "disabled"}},
    )
    assert arguments == {
        "thinking": {"type": "disabled"},
        "model": "anthropic/claude-sonnet-4-5",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Look an order up.",
                    "parameters": {
                        "type": "object",
                        "properties": {"order_id": {"type": "string"}},
                    },
                },
            }
        ],
        "tool_choice": "required",
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.parametrize("route", [OPENAI_RESPONSES, OPENAI_CHAT])
def test_no_tools_means_no_tool_choice(route: ModelRoute) -> None:
    build = responses_arguments if route is OPENAI_RESPONSES else chat_arguments
    arguments = build(request(UserTextItem(text="Hi")), route, {})
    assert "tools" not in arguments
    assert "tool_choice" not in arguments
