"""Each API's output as provider-exact ``ModelOutputItem`` values, and its usage."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from dex_agents.adapters.litellm.chat_stream import ChatStreamAssembler, ToolCallDelta
from dex_agents.adapters.litellm.responses_output import (
    message_text,
    provider_response_id,
    responses_finish_reasons,
    responses_output_item,
    responses_output_items,
)
from dex_agents.adapters.litellm.usage import chat_completions_usage, responses_usage
from dex_agents.domain.model_io import ModelOutputItem, ModelRequest, ModelToolCall, UserTextItem
from dex_agents.domain.usage import AgentUsage
from dex_agents.litellm import LiteLLMModelClient
from tests.adapters.litellm.provider_scripts import (
    chat_stream,
    gemini_stream,
    message_item,
    responses_stream,
)
from tests.adapters.litellm.provider_server import ProviderServer, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.request_cases import (
    FUNCTION_CALL_JSON,
    MESSAGE_JSON,
    REASONING_JSON,
)

REFUSED = "I can't help with that."


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ([{"type": "refusal", "refusal": REFUSED}], REFUSED),
        ([{"type": "output_text", "text": "Sure. ", "annotations": []}, {"type": "refusal", "refusal": REFUSED}], f"Sure. {REFUSED}"),
        ([{"type": "refusal", "refusal": ""}], None),
        ([{"type": "refusal", "refusal": None}, {"type": "refusal", "text": "misplaced"}], None),
    ],
    ids=["refusal", "text-then-refusal", "empty-refusal", "no-refusal-text"],
)  # fmt: skip
def test_a_refusal_is_the_messages_text(content: list[dict[str, Any]], text: str | None) -> None:
    assert message_text(content) == text
    item = responses_output_item(
        {"type": "message", "role": "assistant", "content": content}, "openai"
    )
    assert item.text == text


@pytest.mark.parametrize(
    ("data", "text", "reasoning", "calls"),
    [
        (REASONING_JSON, None, "Need a screenshot.", ()),
        (MESSAGE_JSON, "Taking one.", None, ()),
        (
            FUNCTION_CALL_JSON,
            None,
            None,
            (
                ModelToolCall(
                    tool_call_id="call_1", tool_name="screenshot", arguments='{"page":"home"}'
                ),
            ),
        ),
        ({"id": "ws_1", "type": "web_search_call", "status": "completed"}, None, None, ()),
        (
            {
                "id": "rs_2",
                "type": "reasoning",
                "summary": [
                    {"type": "summary_text", "text": "First."},
                    {"type": "summary_text", "text": "Second."},
                ],
            },
            None,
            "First.\n\nSecond.",
            (),
        ),
    ],
)
def test_responses_output_items_keep_the_providers_json(
    data: dict[str, Any], text: str | None, reasoning: str | None, calls: tuple[ModelToolCall, ...]
) -> None:
    item = responses_output_item(data, "openai")
    assert item == ModelOutputItem(
        item=json.dumps(data, separators=(",", ":")),
        provider="openai",
        api="responses",
        text=text,
        tool_calls=calls,
        reasoning=reasoning,
    )
    assert json.loads(item.item) == data


def _litellm_id(inner: str) -> str:
    return "resp_" + base64.b64encode(inner.encode()).decode()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (_litellm_id("litellm:custom_llm_provider:openai;model_id:None;response_id:resp_abc"), "resp_abc"),
        ("resp_abc", "resp_abc"),
        (_litellm_id("something else"), _litellm_id("something else")),
        (None, None),
        ("", ""),
    ],
)  # fmt: skip
def test_the_providers_response_id_is_read_out_of_litellms(
    given: str | None, expected: str | None
) -> None:
    assert provider_response_id(given) == expected


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("completed", None, ("completed",)),
        ("incomplete", "max_output_tokens", ("max_output_tokens",)),
        ("incomplete", None, ("incomplete",)),
        (None, None, ()),
    ],
)
def test_responses_finish_reasons(
    status: str | None, reason: str | None, expected: tuple[str, ...]
) -> None:
    assert responses_finish_reasons(status, reason) == expected


def test_a_streamed_anthropic_answer_keeps_its_signed_and_redacted_thinking() -> None:
    stream = ChatStreamAssembler()
    stream.add(reasoning="Let me ", thinking_blocks=[{"type": "thinking", "thinking": "Let me "}])
    stream.add(reasoning="look.", thinking_blocks=[{"type": "thinking", "thinking": "look."}])
    # LiteLLM repeats the whole text with the signature.
    stream.add(
        thinking_blocks=[{"type": "thinking", "thinking": "Let me look.", "signature": "Eq+/=="}],
        provider_specific_fields={"thinking_blocks": [{"type": "thinking"}]},
    )
    stream.add(thinking_blocks=[{"type": "redacted_thinking", "data": "EmwK+=="}])
    stream.add(content="Check")
    stream.add(content="ing.")
    stream.add(tool_calls=[ToolCallDelta(index=0, id="toolu_1", name="lookup", arguments="")])
    stream.add(tool_calls=[ToolCallDelta(index=0, arguments='{"order_id":')])
    stream.add(tool_calls=[ToolCallDelta(index=0, arguments=' "7"}')])
    stream.add(tool_calls=[ToolCallDelta(index=1, id="toolu_2", name="ping")])
    assert stream.finish_reason is None
    stream.add(finish_reason="tool_calls")
    assert stream.finished
    message = {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"order_id": "7"}'},
            },
            {"id": "toolu_2", "type": "function", "function": {"name": "ping", "arguments": "{}"}},
        ],
        "thinking_blocks": [
            {"type": "thinking", "thinking": "Let me look.", "signature": "Eq+/=="},
            {"type": "redacted_thinking", "data": "EmwK+=="},
        ],
        "reasoning_content": "Let me look.",
    }
    assert stream.message() == message
    assert stream.output_item("anthropic") == ModelOutputItem(
        item=json.dumps(message, separators=(",", ":")),
        provider="anthropic",
        api="chat_completions",
        text="Checking.",
        tool_calls=(
            ModelToolCall(
                tool_call_id="toolu_1", tool_name="lookup", arguments='{"order_id": "7"}'
            ),
            ModelToolCall(tool_call_id="toolu_2", tool_name="ping", arguments="{}"),
        ),
        reasoning="Let me look.",
    )


def test_provider_specific_fields_such_as_gemini_thought_signatures_are_kept() -> None:
    stream = ChatStreamAssembler()
    stream.add(
        tool_calls=[
            ToolCallDelta(
                index=0,
                id="call_a",
                name="lookup",
                arguments="{}",
                provider_specific_fields={"thought_signature": "CiQB+sig"},
            ),
            # A second call at the same index with its own ID is another call.
            ToolCallDelta(index=0, id="call_b", name="lookup", arguments='{"x":1}'),
        ],
        provider_specific_fields={"thought_signatures": ["CiQB+text"]},
        finish_reason="tool_calls",
    )
    message = stream.message()
    assert message["content"] is None
    assert message["provider_specific_fields"] == {"thought_signatures": ["CiQB+text"]}
    assert [call["id"] for call in message["tool_calls"]] == ["call_a", "call_b"]
    assert message["tool_calls"][0]["provider_specific_fields"] == {"thought_signature": "CiQB+sig"}


def test_a_call_without_an_id_gets_one() -> None:
    stream = ChatStreamAssembler()
    stream.add(
        tool_calls=[ToolCallDelta(index=None, name="ping", arguments="{}")], finish_reason="stop"
    )
    (call,) = stream.output_item("ollama").tool_calls
    assert call.tool_call_id.startswith("call_")
    assert len(call.tool_call_id) == len("call_") + 32


def test_a_call_id_the_session_cannot_record_is_replaced() -> None:
    stream = ChatStreamAssembler()
    stream.add(
        tool_calls=[
            ToolCallDelta(index=0, id="0", name="ping", arguments="{}"),
            ToolCallDelta(index=1, id="0", name="ping", arguments="{}"),
            ToolCallDelta(index=2, id="a/b", name="ping", arguments="{}"),
            ToolCallDelta(index=3, id="1", name="ping", arguments="{}"),
            ToolCallDelta(index=4, id="2", name="ping", arguments="{}"),
        ],
        finish_reason="tool_calls",
    )
    item = stream.output_item("huggingface", taken_ids={"1"})
    ids = [call.tool_call_id for call in item.tool_calls]
    assert ids[0] == "0"
    assert ids[4] == "2"
    assert all(call_id.startswith("call_") for call_id in ids[1:4])
    assert len(set(ids)) == 5
    assert [call["id"] for call in json.loads(item.item)["tool_calls"]] == ids


def test_a_responses_call_id_the_session_cannot_record_is_replaced() -> None:
    # LiteLLM bridges other providers' calls into the Responses API with their IDs.
    def call(call_id: str | None) -> dict[str, Any]:
        item = {"type": "function_call", "name": "ping", "arguments": "{}", "call_id": call_id}
        return {key: value for key, value in item.items() if value is not None}

    items = responses_output_items(
        [call("0"), call("0"), call("a/b"), call(None), call("1"), call("2")],
        "groq",
        taken_ids={"1"},
    )
    ids = [item.tool_calls[0].tool_call_id for item in items]
    assert ids[0] == "0"
    assert ids[5] == "2"
    assert all(call_id.startswith("call_") for call_id in ids[1:5])
    assert len(set(ids)) == 6
    assert [json.loads(item.item)["call_id"] for item in items] == ids


def test_a_name_sent_again_in_every_chunk_is_the_calls_name() -> None:
    stream = ChatStreamAssembler()
    for arguments in ('{"order', '_id": ', '"7"}'):
        stream.add(
            tool_calls=[ToolCallDelta(index=0, id="call_1", name="lookup", arguments=arguments)]
        )
    stream.add(tool_calls=[ToolCallDelta(index=1, id="call_2", name="look")])
    stream.add(
        tool_calls=[ToolCallDelta(index=1, name="up", arguments="{}")], finish_reason="tool_calls"
    )
    calls = stream.output_item("nvidia_nim").tool_calls
    assert [(call.tool_name, call.arguments) for call in calls] == [
        ("lookup", '{"order_id": "7"}'),
        ("lookup", "{}"),
    ]


async def test_a_chat_answer_whose_chunks_name_no_choice_index_is_kept(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # Some OpenAI-compatible servers leave "index" out of each choice.
    events = chat_stream("Order 7 shipped.")
    for _, data in events:
        for choice in data["choices"] if isinstance(data, dict) else ():
            del choice["index"]
    server.script(sse_reply(events))
    client = LiteLLMModelClient(
        "openai/local-model",
        api="chat_completions",
        api_base=server.url + "/v1",
        api_key_provider=lambda: "tenant-key-0123456789abcdef",
    )
    request = ModelRequest(instructions="You help.", items=(UserTextItem(text="Order 7?"),))
    response = await client.call_model(request, output)
    assert [item.text for item in response.output] == ["Order 7 shipped."]
    assert output.text() == "Order 7 shipped."


async def test_a_gemini_answer_whose_usage_comes_after_the_finish_is_kept(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # LiteLLM keeps Gemini's finish reason only until the next chunk, here usage alone.
    events = gemini_stream([{"text": "Order 7 shipped."}], model="gemini-2.5-flash")
    _, last = events[-1]
    events.append(
        (None, {"usageMetadata": last.pop("usageMetadata"), "modelVersion": "gemini-2.5-flash"})
    )
    server.script(sse_reply(events))
    client = LiteLLMModelClient(
        "gemini/gemini-2.5-flash",
        api_base=server.url,
        api_key_provider=lambda: "tenant-key-0123456789abcdef",
    )
    request = ModelRequest(instructions="You help.", items=(UserTextItem(text="Order 7?"),))
    response = await client.call_model(request, output)
    assert [item.text for item in response.output] == ["Order 7 shipped."]
    assert response.usage == AgentUsage(model_calls=1, input_tokens=40, output_tokens=12)
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.finish_reasons == ("stop",)


async def test_reasoning_summary_parts_stream_as_the_paragraphs_they_are_stored_as(
    server: ProviderServer, output: RecordingOutput
) -> None:
    parts = ["**Finding the order**\n\nLook it up.", "**Answering**\n\nSay when."]
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text} for text in parts],
        "encrypted_content": "gAAAA==",
    }
    server.script(sse_reply(responses_stream([reasoning, message_item("msg_1", "Friday.")])))
    client = LiteLLMModelClient(
        "openai/gpt-5-mini",
        api_base=server.url + "/v1",
        api_key_provider=lambda: "tenant-key-0123456789abcdef",
    )
    request = ModelRequest(instructions="You help.", items=(UserTextItem(text="Order 7?"),))
    response = await client.call_model(request, output)
    assert response.output[0].reasoning == "\n\n".join(parts)
    assert output.text("reasoning") == response.output[0].reasoning


def test_unsigned_thinking_is_kept_as_it_streamed() -> None:
    stream = ChatStreamAssembler()
    stream.add(reasoning="Hmm.", thinking_blocks=[{"type": "thinking", "thinking": "Hmm."}])
    stream.add(content="Yes.", finish_reason="stop")
    assert stream.message()["thinking_blocks"] == [{"type": "thinking", "thinking": "Hmm."}]


@pytest.mark.parametrize(
    ("data", "usage"),
    [
        (
            {
                "input_tokens": 120,
                "input_tokens_details": {"cached_tokens": 20},
                "output_tokens": 30,
                "output_tokens_details": {"reasoning_tokens": 12},
            },
            AgentUsage(model_calls=1, input_tokens=120, output_tokens=30, cached_input_tokens=20, reasoning_tokens=12),
        ),
        ({"input_tokens": 5, "output_tokens": 1, "input_tokens_details": None}, AgentUsage(model_calls=1, input_tokens=5, output_tokens=1)),
        (None, AgentUsage(model_calls=1)),
    ],
)  # fmt: skip
def test_responses_usage(data: dict[str, Any] | None, usage: AgentUsage) -> None:
    assert responses_usage(data) == usage


@pytest.mark.parametrize(
    ("data", "usage"),
    [
        (
            {
                "prompt_tokens": 60,
                "completion_tokens": 25,
                "prompt_tokens_details": {"cached_tokens": 10},
                "completion_tokens_details": {"reasoning_tokens": 4},
            },
            AgentUsage(model_calls=1, input_tokens=60, output_tokens=25, cached_input_tokens=10, reasoning_tokens=4),
        ),
        ({"prompt_tokens": 3, "completion_tokens": None}, AgentUsage(model_calls=1, input_tokens=3)),
        ({"prompt_tokens": True, "completion_tokens": -1}, AgentUsage(model_calls=1)),
        (None, AgentUsage(model_calls=1)),
    ],
)  # fmt: skip
def test_chat_completions_usage(data: dict[str, Any] | None, usage: AgentUsage) -> None:
    assert chat_completions_usage(data) == usage
