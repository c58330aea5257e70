"""What LiteLLM 1.105 does not expose, and what the client reports instead.

Each test pins one limit that ``docs/spec-differences.md`` names ("LiteLLM
1.105"), against a provider on loopback, so a LiteLLM upgrade that lifts it
fails here and the client can follow.
"""

from __future__ import annotations

import litellm
import pytest

from dex_agents.domain.model_io import ModelRequest, ModelToolDefinition, UserTextItem
from dex_agents.litellm import LiteLLMModelClient
from tests.adapters.litellm.bedrock_scripts import bedrock_env, converse_reply
from tests.adapters.litellm.provider_scripts import (
    anthropic_stream,
    chat_stream,
    gemini_stream,
    message_item,
    responses_stream,
)
from tests.adapters.litellm.provider_server import ProviderServer, Reply, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.session_support import KEY
from tests.adapters.litellm.vertex_support import LOCATION, PROJECT, vertex_options, vertex_token

litellm.suppress_debug_info = True

REQUEST = ModelRequest(instructions="Be brief.", items=(UserTextItem(text="Hi"),))
LOOKUP = ModelToolDefinition(
    name="lookup",
    description="Look an order up.",
    parameters_schema={"type": "object", "properties": {"order_id": {"type": "string"}}},
)


def _key() -> str:
    return KEY


def _client(server: ProviderServer, api: str) -> LiteLLMModelClient:
    if api == "responses":
        return LiteLLMModelClient(
            "openai/gpt-5-mini", api_base=server.url + "/v1", api_key_provider=_key
        )
    if api == "chat":
        return LiteLLMModelClient(
            "openai/gpt-4.1",
            api="chat_completions",
            api_base=server.url + "/v1",
            api_key_provider=_key,
        )
    if api == "azure":
        return LiteLLMModelClient(
            "azure/support-deployment",
            api_base=server.url,
            api_key_provider=_key,
            request_options={"api_version": "2024-10-21"},
        )
    if api == "anthropic":
        return LiteLLMModelClient(
            "anthropic/claude-sonnet-4-5", api_base=server.url, api_key_provider=_key
        )
    return LiteLLMModelClient("gemini/gemini-2.5-pro", api_base=server.url, api_key_provider=_key)


def _answer(api: str, model: str) -> Reply:
    if api == "responses":
        return sse_reply(responses_stream([message_item("msg_1", "Hello.")], model=model))
    if api in ("chat", "azure"):
        return sse_reply(chat_stream("Hello.", model=model))
    if api == "anthropic":
        return sse_reply(anthropic_stream([{"type": "text", "text": "Hello."}], model=model))
    return sse_reply(gemini_stream([{"text": "Hello."}], model=model))


@pytest.mark.parametrize(
    ("api", "answered"),
    [
        ("responses", "gpt-5-mini-2025-08-07"),
        ("chat", "gpt-4.1-2025-04-14"),
        ("azure", "gpt-4.1-2025-04-14"),
        ("anthropic", "claude-sonnet-4-5-20250929"),
        ("gemini", "gemini-2.5-pro-002"),
    ],
)
async def test_the_response_model_is_the_model_that_answered(
    server: ProviderServer, output: RecordingOutput, api: str, answered: str
) -> None:
    # LiteLLM's Chat Completions stream names every chunk after the requested model
    # (Azure's after its deployment): reporting that as the answer's model was
    # wrong, and reporting none dropped what LiteLLM keeps of the provider's.
    server.script(_answer(api, answered))
    response = await _client(server, api).call_model(REQUEST, output)
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.response_model == answered
    server.assert_script_used()


async def test_litellm_names_chat_completions_chunks_after_the_model_asked_for(
    server: ProviderServer,
) -> None:
    # The limit the client works round: the chunk's model is the alias asked for;
    # the provider's name is only in the chunk's _hidden_params.
    server.script(_answer("chat", "gpt-4.1-2025-04-14"))
    stream = await litellm.acompletion(
        model="openai/gpt-4.1",
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        api_base=server.url + "/v1",
        api_key=KEY,
        max_retries=0,
    )
    seen = {
        (chunk.model, chunk._hidden_params.get("provider_response_model")) async for chunk in stream
    }
    assert seen == {("gpt-4.1", "gpt-4.1-2025-04-14")}


async def test_anthropic_reasoning_tokens_are_litellms_count_of_the_streamed_thinking(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # Anthropic reports no thinking tokens; LiteLLM counts the thinking text it
    # streamed (a summary, for Claude 4 models) with its own tokenizer, so the
    # count is LiteLLM's estimate, and at most the answer's output tokens.
    thinking = "The user greets me, so I should greet them back briefly and warmly."
    blocks = [
        {"type": "thinking", "thinking": thinking, "signature": "EqQBCkYIBxgC"},
        {"type": "text", "text": "Hello."},
    ]
    server.script(sse_reply(anthropic_stream(blocks, output_tokens=400)))
    response = await _client(server, "anthropic").call_model(REQUEST, output)
    counted = litellm.token_counter(text=thinking, count_response_tokens=True)
    assert 0 < response.usage.reasoning_tokens == counted < 400
    assert response.usage.output_tokens == 400


async def test_litellm_names_an_anthropic_answer_with_an_id_of_its_own(
    server: ProviderServer,
) -> None:
    # The message_start event holds the message ID; LiteLLM drops it, and every
    # chunk carries a chatcmpl-<uuid> that LiteLLM made up.
    server.script(sse_reply(anthropic_stream([{"type": "text", "text": "Hello."}])))
    stream = await litellm.acompletion(
        model="anthropic/claude-sonnet-4-5",
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        api_base=server.url,
        api_key=KEY,
        max_retries=0,
    )
    ids = {chunk.id async for chunk in stream}
    assert len(ids) == 1
    (litellm_id,) = ids
    assert litellm_id.startswith("chatcmpl-")
    assert "msg_01" not in litellm_id


@pytest.mark.parametrize(("api", "reported"), [("chat", "chatcmpl-1"), ("anthropic", None)])
async def test_a_chat_completions_answer_reports_the_providers_id_or_none(
    server: ProviderServer, output: RecordingOutput, api: str, reported: str | None
) -> None:
    # The provider's own ID passes through; LiteLLM's made-up one for Anthropic
    # names nothing the provider knows.
    server.script(_answer(api, "some-model"))
    response = await _client(server, api).call_model(REQUEST, output)
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.response_id == reported
    server.assert_script_used()


@pytest.mark.parametrize(
    ("model", "path"),
    [
        ("azure_ai/claude-sonnet-4-5", "/anthropic/v1/messages"),
        (
            "vertex_ai/claude-sonnet-4-5@20250929",
            f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/anthropic/models/"
            "claude-sonnet-4-5@20250929:streamRawPredict?alt=sse",
        ),
    ],
)
async def test_claude_on_a_cloud_reports_no_id_that_litellm_made_up(
    server: ProviderServer,
    output: RecordingOutput,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    path: str,
) -> None:
    # Vertex AI and Azure AI answer in Anthropic's Messages stream, which LiteLLM
    # reads as Anthropic's: it names the answer chatcmpl-<uuid>, as the span showed.
    server.script(sse_reply(anthropic_stream([{"type": "text", "text": "Hello."}])))
    if model.startswith("vertex_ai/"):
        client = LiteLLMModelClient(model, api_base=server.url, request_options=vertex_options())
        with vertex_token(monkeypatch):
            response = await client.call_model(REQUEST, output)
    else:
        client = LiteLLMModelClient(model, api_base=server.url, api_key_provider=_key)
        response = await client.call_model(REQUEST, output)
    assert [request.path for request in server.requests] == [path]
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.response_id is None
    assert output.text() == "Hello."
    server.assert_script_used()


@pytest.mark.parametrize(
    "model",
    ["bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock/amazon.nova-pro-v1:0"],
)
async def test_a_bedrock_answer_reports_no_id_that_litellm_made_up(
    server: ProviderServer, output: RecordingOutput, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    # Bedrock's Converse stream carries no ID of the answer; LiteLLM names it
    # chatcmpl-<uuid>, which no Bedrock record holds.
    bedrock_env(monkeypatch)
    server.script(converse_reply("Hello."))
    response = await LiteLLMModelClient(model, api_base=server.url).call_model(REQUEST, output)
    assert server.requests[0].path.endswith("/converse-stream")
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.response_id is None
    assert output.text() == "Hello."
    server.assert_script_used()


@pytest.mark.parametrize(
    "model", ["bedrock/chat_completions/openai.gpt-oss-20b-1:0", "bedrock/global.openai.gpt-6-sol"]
)
async def test_bedrocks_native_chat_completions_answer_reports_the_providers_id(
    server: ProviderServer, output: RecordingOutput, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    # Bedrock Runtime's OpenAI-compatible Chat Completions (the chat_completions/
    # route, and GPT 5.6 and newer by default) names its answer, and LiteLLM keeps
    # the ID; only Converse's answer carries none.
    bedrock_env(monkeypatch)
    server.script(sse_reply(chat_stream(text="Hello.")))
    response = await LiteLLMModelClient(model, api_base=server.url).call_model(REQUEST, output)
    assert [request.path for request in server.requests] == ["/openai/v1/chat/completions"]
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.response_id == "chatcmpl-1"
    assert output.text() == "Hello."
    server.assert_script_used()


async def test_a_request_bedrock_sends_to_converse_instead_reports_no_id(
    server: ProviderServer, output: RecordingOutput, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LiteLLM sends a GPT 5.6+ request with tools and reasoning to Converse, whose
    # stream names no answer: the ID is LiteLLM's own, whatever the model's route.
    bedrock_env(monkeypatch)
    server.script(converse_reply("Hello."))
    request = ModelRequest(instructions="Be brief.", items=REQUEST.items, tools=(LOOKUP,))
    client = LiteLLMModelClient("bedrock/global.openai.gpt-6-sol", api_base=server.url)
    response = await client.call_model(request, output)
    assert server.requests[0].path.endswith("/converse-stream")
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.response_id is None
    server.assert_script_used()


def _without_usage(api: str, text: str) -> Reply:
    """An answer of ``text`` on ``api`` whose stream reports no usage at all."""
    if api == "responses":
        events = responses_stream([message_item("msg_1", text)])
        kind, last = events[-1]
        events[-1] = (kind, {**last, "response": {**last["response"], "usage": None}})
        return sse_reply(events)
    if api == "chat":
        return sse_reply([e for e in chat_stream(text) if "usage" not in e[1]])
    if api == "anthropic":
        events = []
        for kind, data in anthropic_stream([{"type": "text", "text": text}]):
            if kind == "message_start":
                message = {key: value for key, value in data["message"].items() if key != "usage"}
                data = {**data, "message": message}
            elif kind == "message_delta":
                data = {key: value for key, value in data.items() if key != "usage"}
            events.append((kind, data))
        return sse_reply(events)
    return sse_reply(
        [
            (kind, {key: value for key, value in data.items() if key != "usageMetadata"})
            for kind, data in gemini_stream([{"text": text}])
        ]
    )


@pytest.mark.parametrize("api", ["responses", "chat", "anthropic", "gemini"])
async def test_usage_the_provider_never_reported_is_litellms_count(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    # LiteLLM counts the request and the answer with its own tokenizer when the
    # stream reports no usage, and hands that count on as the answer's usage.
    answer = "Order 7 shipped today and arrives on Friday."
    server.script(_without_usage(api, answer))
    response = await _client(server, api).call_model(REQUEST, output)
    assert response.text == answer
    assert response.usage.input_tokens > 0  # the provider said nothing, and it is not 0
    assert response.usage.output_tokens > 0
    server.assert_script_used()
