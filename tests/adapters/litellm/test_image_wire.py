"""Images reach each provider on loopback in that provider's own form ("Images on the built-in loop").

A user message's image and a tool result's image go through LiteLLM to the
provider's wire: the Responses API's ``input_image`` parts (in the message and
in the ``function_call_output``), Chat Completions' ``image_url`` parts (the
tool result's in a user message after the tool message), Anthropic's and
Bedrock's image blocks (in the tool result too), and Gemini's ``inline_data``,
whose tool result holds the text that says its images are not sent. Each
image follows its item's text, with the bytes it was stored with.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import attrs
import litellm
import pytest

from dex_agents.adapters.litellm.routing import ModelApi
from dex_agents.domain.model_io import (
    ModelRequest,
    ModelResponse,
    ModelToolDefinition,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.litellm import LiteLLMModelClient
from tests.adapters.litellm.bedrock_scripts import bedrock_env, converse_reply
from tests.adapters.litellm.provider_scripts import (
    anthropic_reply,
    chat_reply,
    function_call_item,
    gemini_reply,
    message_item,
    responses_reply,
)
from tests.adapters.litellm.provider_server import ProviderServer, Reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.request_cases import (
    IMAGE_BYTES,
    JPEG,
    JPEG_IMAGE,
    JPEG_URL,
    PNG,
    PNG_IMAGE,
    PNG_URL,
)
from tests.adapters.litellm.session_support import BEDROCK_CLAUDE, KEY

litellm.suppress_debug_info = True

ASK = "What does this chart show?"
SHIPPED = "order 7 shipped"
PNG_BASE64 = base64.b64encode(PNG).decode()
JPEG_BASE64 = base64.b64encode(JPEG).decode()
LOOKUP = ModelToolDefinition(
    name="lookup",
    description="Look an order up.",
    parameters_schema={"type": "object", "properties": {"order_id": {"type": "string"}}},
)


@attrs.frozen(kw_only=True)
class Route:
    """One route: its client, its two answers, and where and how each image reaches it."""

    client: Callable[[str], LiteLLMModelClient]
    asks_for_the_tool: Reply
    answers: Reply
    conversation: str
    """The request body's key of the conversation (``input``, ``messages``, ``contents``)."""
    user: dict[str, Any]
    """The conversation's first message after the instructions: the user's text and image."""
    tool_result: Callable[[str], list[dict[str, Any]]]
    """The conversation's last messages, for the tool call's ID: the result and its image."""


def _openai(api: ModelApi | None) -> Callable[[str], LiteLLMModelClient]:
    model = "openai/gpt-5-mini" if api is None else "openai/gpt-4.1"
    return lambda url: LiteLLMModelClient(
        model, api=api, api_base=url + "/v1", api_key_provider=lambda: KEY
    )


def _keyed(model: str) -> Callable[[str], LiteLLMModelClient]:
    return lambda url: LiteLLMModelClient(model, api_base=url, api_key_provider=lambda: KEY)


def _anthropic_image(mime_type: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data}}


def _bedrock_image(image_format: str, data: str) -> dict[str, Any]:
    return {"image": {"source": {"bytes": data}, "format": image_format}}


ROUTES = {
    "responses": Route(
        client=_openai(None),
        asks_for_the_tool=responses_reply(
            [function_call_item("fc_1", "call_1", "lookup", '{"order_id":"7"}')]
        ),
        answers=responses_reply([message_item("msg_1", "It shipped.")]),
        conversation="input",
        user={
            "role": "user",
            "content": [
                {"type": "input_text", "text": ASK},
                {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
            ],
        },
        tool_result=lambda call_id: [
            {
                "type": "function_call_output",
                "call_id": call_id,
                "output": [
                    {"type": "input_text", "text": SHIPPED},
                    {"type": "input_image", "image_url": JPEG_URL, "detail": "auto"},
                ],
            }
        ],
    ),
    "chat": Route(
        client=_openai("chat_completions"),
        asks_for_the_tool=chat_reply(None, [("call_9", "lookup", '{"order_id": "7"}')]),
        answers=chat_reply("It shipped."),
        conversation="messages",
        user={
            "role": "user",
            "content": [
                {"type": "text", "text": ASK},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
            ],
        },
        tool_result=lambda call_id: [
            {"role": "tool", "tool_call_id": call_id, "content": SHIPPED},
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": f"The lookup tool call {call_id} returned these images.",
                    },
                    {"type": "image_url", "image_url": {"url": JPEG_URL}},
                ],
            },
        ],
    ),
    "anthropic": Route(
        client=_keyed("anthropic/claude-sonnet-4-5"),
        asks_for_the_tool=anthropic_reply(
            [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order_id": "7"}}]
        ),
        answers=anthropic_reply([{"type": "text", "text": "It shipped."}]),
        conversation="messages",
        user={
            "role": "user",
            "content": [
                {"type": "text", "text": ASK},
                _anthropic_image("image/png", PNG_BASE64),
            ],
        },
        tool_result=lambda call_id: [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": [
                            {"type": "text", "text": SHIPPED},
                            _anthropic_image("image/jpeg", JPEG_BASE64),
                        ],
                    }
                ],
            }
        ],
    ),
    "gemini": Route(
        client=_keyed("gemini/gemini-2.5-pro"),
        asks_for_the_tool=gemini_reply(
            [{"functionCall": {"name": "lookup", "args": {"order_id": "7"}}}]
        ),
        answers=gemini_reply([{"text": "It shipped."}]),
        conversation="contents",
        user={
            "role": "user",
            "parts": [
                {"text": ASK},
                {"inline_data": {"data": PNG_BASE64, "mime_type": "image/png"}},
            ],
        },
        tool_result=lambda call_id: [
            {
                "role": "user",
                "parts": [
                    {
                        "function_response": {
                            "name": "lookup",
                            "response": {
                                "content": f"{SHIPPED}\n\n[The tool returned 1 image; "
                                "this model does not receive images from tool results.]"
                            },
                        }
                    }
                ],
            }
        ],
    ),
    "bedrock": Route(
        client=lambda url: LiteLLMModelClient(BEDROCK_CLAUDE, api_base=url),
        asks_for_the_tool=converse_reply(None, [("tooluse_9", "lookup", '{"order_id": "7"}')]),
        answers=converse_reply("It shipped."),
        conversation="messages",
        user={"role": "user", "content": [{"text": ASK}, _bedrock_image("png", PNG_BASE64)]},
        tool_result=lambda call_id: [
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "content": [{"text": SHIPPED}, _bedrock_image("jpeg", JPEG_BASE64)],
                            "toolUseId": call_id,
                        }
                    }
                ],
            }
        ],
    ),
}


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock_env(monkeypatch)


def _request(*items: Any) -> ModelRequest:
    return ModelRequest(
        instructions="You help with orders.", items=items, tools=(LOOKUP,), image_bytes=IMAGE_BYTES
    )


@pytest.mark.parametrize("name", list(ROUTES))
async def test_a_user_image_and_a_tool_result_image_reach_the_provider_in_its_form(
    server: ProviderServer, output: RecordingOutput, name: str
) -> None:
    route = ROUTES[name]
    server.script(route.asks_for_the_tool, route.answers)
    client = route.client(server.url)
    user = UserTextItem(text=ASK, images=(PNG_IMAGE,))
    first: ModelResponse = await client.call_model(_request(user), output)
    (call,) = first.tool_calls
    result = ToolResultItem(
        tool_call_id=call.tool_call_id, tool_name="lookup", output=SHIPPED, images=(JPEG_IMAGE,)
    )
    await client.call_model(_request(user, *first.output, result), output)
    asked, answered = (
        # Chat Completions sends the instructions as the first message.
        [message for message in request.body[route.conversation] if message.get("role") != "system"]
        for request in server.requests
    )
    assert asked == [route.user]
    assert answered[0] == route.user  # the image again, as it was
    expected = route.tool_result(call.tool_call_id)
    assert answered[-len(expected) :] == expected
    server.assert_script_used()
