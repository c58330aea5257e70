"""Errors a provider answers with HTTP 200: a JSON error body, and the Responses API's flat error event.

LiteLLM (1.105) read a JSON error body sent in place of a stream as a stream
that ended with nothing, and the Responses API's error event in its documented
flat shape as a generic in-stream error: both were retryable stream breaks
without the provider's words, retried even for a context that is too long.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import litellm
import pytest

from dex_agents.adapters.litellm.answered_errors import answered_error, is_retryable_kind
from dex_agents.litellm import LiteLLMModelClient, ModelProviderError, ModelStreamInterruptedError
from tests.adapters.litellm.provider_scripts import (
    chat_stream,
    message_item,
    responses_stream,
)
from tests.adapters.litellm.provider_server import ProviderServer, json_reply, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.test_client_errors import APIS, KEY, REQUEST, clients
from tests.adapters.litellm.vertex_support import vertex_options, vertex_token

litellm.suppress_debug_info = True

CONTEXT = "This model's maximum context length is 128000 tokens."

OPENAI_CONTEXT = {
    "error": {
        "message": CONTEXT,
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC_OVERLOADED = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
}
OPENAI_RATE_LIMIT = {
    "error": {"message": "Rate limit reached.", "type": "requests", "code": "rate_limit_exceeded"}
}


def assert_answered(
    error: ModelProviderError, provider: str, message: str, *, retryable: bool
) -> None:
    """``error`` is the provider's answered error: its message, no status, the kind's retry rule."""
    assert type(error) is ModelProviderError
    assert (error.status_code, error.retryable) == (None, retryable)
    assert str(error) == f"{provider} model call failed: {message}"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("body", "message", "retryable"),
    [
        (OPENAI_CONTEXT, CONTEXT, False),
        (ANTHROPIC_OVERLOADED, "Overloaded", True),
        (OPENAI_RATE_LIMIT, "Rate limit reached.", True),
    ],
    ids=["context-too-long", "overloaded", "rate-limit"],
)
async def test_a_json_error_answered_with_200_keeps_the_providers_words_and_kind(
    server: ProviderServer,
    output: RecordingOutput,
    api: str,
    body: dict[str, Any],
    message: str,
    retryable: bool,
) -> None:
    server.script(json_reply(200, body))
    client = clients(server)[api]
    with pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    # The provider answered: no stream broke.
    assert_answered(caught.value, client.provider, message, retryable=retryable)
    server.assert_script_used()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("compression", ["gzip", "deflate", "zstd"])
async def test_a_compressed_json_error_answered_with_200_keeps_the_providers_words_and_kind(
    server: ProviderServer, output: RecordingOutput, api: str, compression: str
) -> None:
    # The OpenAI SDK asks for a compressed body, and the watch read the bytes
    # before the HTTP client decoded them: the error was a retryable stream break.
    server.script(replace(json_reply(200, OPENAI_CONTEXT), compression=compression))
    client = clients(server)[api]
    with pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    assert_answered(caught.value, client.provider, CONTEXT, retryable=False)
    server.assert_script_used()


async def test_a_compressed_flat_responses_error_event_keeps_its_message_and_code(
    server: ProviderServer, output: RecordingOutput
) -> None:
    events = responses_stream([message_item("msg_1", "Half of an answer")])[:3]
    flat = {"type": "error", "sequence_number": 3, "code": "context_length_exceeded"}
    server.script(
        replace(sse_reply([*events, ("error", {**flat, "message": CONTEXT})]), compression="gzip")
    )
    with pytest.raises(ModelProviderError) as caught:
        await clients(server)["responses"].call_model(REQUEST, output)
    assert_answered(caught.value, "openai", CONTEXT, retryable=False)
    server.assert_script_used()


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_a_compressed_answer_is_read_as_sent(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    answer = [message_item("msg_1", "Order 7 is late.")]
    reply = responses_stream(answer) if api == "responses" else chat_stream("Order 7 is late.")
    server.script(replace(sse_reply(reply), compression="gzip"))
    response = await clients(server)[api].call_model(REQUEST, output)
    assert response.text == "Order 7 is late."
    server.assert_script_used()


@pytest.mark.parametrize("api", APIS)
async def test_a_json_error_answered_with_200_shows_no_key(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    body = {"error": {"message": f"key {KEY} may not use this model", "type": "permission_error"}}
    server.script(json_reply(200, body))
    with pytest.raises(ModelProviderError) as caught:
        await clients(server)[api].call_model(REQUEST, output)
    assert KEY not in str(caught.value)
    assert str(caught.value).endswith("key [redacted] may not use this model")


@pytest.mark.parametrize(
    ("code", "kind", "retryable"),
    [
        ("context_length_exceeded", ModelProviderError, False),
        ("server_error", ModelStreamInterruptedError, True),
        ("rate_limit_exceeded", ModelStreamInterruptedError, True),
    ],
)
async def test_a_flat_responses_error_event_keeps_its_message_and_code(
    server: ProviderServer,
    output: RecordingOutput,
    code: str,
    kind: type[ModelProviderError],
    retryable: bool,
) -> None:
    # The error event as the Responses API reference documents it: code and message on top.
    events = responses_stream([message_item("msg_1", "Half of an answer")])[:3]
    flat = {"type": "error", "sequence_number": 3, "code": code, "message": CONTEXT, "param": None}
    server.script(sse_reply([*events, ("error", flat)]))
    with pytest.raises(ModelProviderError) as caught:
        await clients(server)["responses"].call_model(REQUEST, output)
    assert type(caught.value) is kind
    assert (caught.value.status_code, caught.value.retryable) == (None, retryable)
    assert str(caught.value).endswith(f": {CONTEXT}")
    server.assert_script_used()


@pytest.mark.parametrize(
    ("kinds", "status", "retryable"),
    [
        (("context_length_exceeded", "invalid_request_error"), None, False),
        (("insufficient_quota",), None, False),
        (("rate_limit_exceeded", "requests"), None, True),
        (("overloaded_error",), None, True),
        (("api_error",), None, True),
        (("UNAVAILABLE",), None, True),
        (("INVALID_ARGUMENT",), 400, False),
        (("RESOURCE_EXHAUSTED",), 429, True),
        ((), None, True),
    ],
)
def test_whether_a_retry_helps_follows_the_errors_kind(
    kinds: tuple[str, ...], status: int | None, retryable: bool
) -> None:
    assert is_retryable_kind(kinds, status) is retryable


@pytest.mark.parametrize(
    "data",
    [
        {"id": "chatcmpl-1", "choices": []},
        {"type": "response.output_text.delta", "delta": "error"},
        {"error": None},
        [{"error": {"message": "a list is no error body"}}],
    ],
)
def test_a_body_without_an_error_holds_none(data: object) -> None:
    assert answered_error(data, in_stream=False) is None


@pytest.mark.parametrize(
    "model", ["deepseek/deepseek-chat", "xai/grok-4", "mistral/mistral-large-latest"]
)
@pytest.mark.parametrize(
    ("body", "message", "retryable"),
    [(OPENAI_CONTEXT, CONTEXT, False), (OPENAI_RATE_LIMIT, "Rate limit reached.", True)],
    ids=["context-too-long", "rate-limit"],
)
async def test_a_json_error_answered_with_200_by_an_openai_compatible_provider_keeps_its_kind(
    server: ProviderServer,
    output: RecordingOutput,
    model: str,
    body: dict[str, Any],
    message: str,
    retryable: bool,
) -> None:
    # LiteLLM reads these providers' streams with its own HTTP handler, whose
    # unread response its stream keeps apart from the OpenAI SDK's: the error
    # was a retryable stream break, retried even for a context that is too long.
    await _assert_answered_with_200(server, output, model, body, message, retryable=retryable)


async def _assert_answered_with_200(
    server: ProviderServer,
    output: RecordingOutput,
    model: str,
    body: dict[str, Any],
    message: str,
    *,
    retryable: bool,
) -> None:
    """A call to ``model`` answered ``body`` with HTTP 200 raises the provider's error."""
    server.script(json_reply(200, body))
    client = LiteLLMModelClient(model, api_base=server.url, api_key_provider=lambda: KEY)
    with pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    assert_answered(caught.value, client.provider, message, retryable=retryable)
    server.assert_script_used()


@pytest.mark.parametrize("model", ["groq/openai/gpt-oss-120b", "openrouter/openai/gpt-4.1"])
async def test_an_error_whose_code_is_a_name_is_the_providers_not_litellms_value_error(
    server: ProviderServer, output: RecordingOutput, model: str
) -> None:
    # LiteLLM files such an error chunk with int(code): a bare ValueError
    # ("invalid literal for int()") escaped the call, no ModelProviderError at all.
    await _assert_answered_with_200(server, output, model, OPENAI_CONTEXT, CONTEXT, retryable=False)


@pytest.mark.parametrize("model", ["groq/openai/gpt-oss-120b", "openrouter/openai/gpt-4.1"])
async def test_a_retryable_error_chunk_whose_code_is_a_name_breaks_the_stream(
    server: ProviderServer, output: RecordingOutput, model: str
) -> None:
    # OpenRouter ends a stream that failed mid-answer with such a chunk.
    events = chat_stream("Half of an answer")[:2]
    failed = {"error": {"code": "server_error", "message": "Upstream provider failed."}}
    server.script(sse_reply([*events, (None, failed)]))
    client = LiteLLMModelClient(model, api_base=server.url, api_key_provider=lambda: KEY)
    with pytest.raises(ModelStreamInterruptedError) as caught:
        await client.call_model(REQUEST, output)
    assert caught.value.retryable is True
    assert str(caught.value).endswith(
        "stream broke before the answer ended: Upstream provider failed."
    )
    server.assert_script_used()


CLOUD_CLAUDES = ["azure_ai/claude-sonnet-4-5", "vertex_ai/claude-sonnet-4-5@20250929"]


def _cloud_claude(model: str, server: ProviderServer) -> LiteLLMModelClient:
    if model.startswith("vertex_ai/"):
        return LiteLLMModelClient(model, api_base=server.url, request_options=vertex_options())
    return LiteLLMModelClient(model, api_base=server.url, api_key_provider=lambda: KEY)


@pytest.mark.parametrize("model", CLOUD_CLAUDES)
async def test_a_json_error_answered_with_200_for_claude_on_a_cloud_keeps_its_words_and_kind(
    server: ProviderServer, output: RecordingOutput, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    # LiteLLM reads these with its Anthropic reader, the HTTP response out of
    # reach: the error read as a retryable stream that ended with nothing.
    too_long = {"type": "error", "error": {"type": "invalid_request_error", "message": CONTEXT}}
    server.script(json_reply(200, too_long))
    client = _cloud_claude(model, server)
    with vertex_token(monkeypatch), pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    assert_answered(caught.value, client.provider, CONTEXT, retryable=False)
    server.assert_script_used()


@pytest.mark.parametrize("finish", ["error", "abort"])
@pytest.mark.parametrize(
    "model", ["openai/gpt-4.1", "openrouter/openai/gpt-4.1", "deepseek/deepseek-chat"]
)
async def test_an_answer_the_provider_ended_with_a_failed_finish_is_a_broken_stream(
    server: ProviderServer, output: RecordingOutput, model: str, finish: str
) -> None:
    # LiteLLM read such a finish reason as "stop": half an answer was the answer.
    events = chat_stream("Half of an answer that")[:3]
    first: dict[str, Any] = events[0][1]
    ended = {**first, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    server.script(sse_reply([*events, (None, ended), (None, "[DONE]")]))
    base = server.url + ("/v1" if model.startswith("openai/") else "")
    client = LiteLLMModelClient(
        model, api="chat_completions", api_base=base, api_key_provider=lambda: KEY
    )
    with pytest.raises(ModelStreamInterruptedError) as caught:
        await client.call_model(REQUEST, output)
    assert caught.value.retryable is True
    # LiteLLM's own streaming error on the OpenAI SDK's route names "error" its way.
    assert str(caught.value).startswith(
        f"the {client.provider} stream broke before the answer ended: "
    )
    assert f"finish_reason: {finish}" in str(caught.value) or str(caught.value).endswith(
        f"the provider ended it with finish reason {finish!r}"
    )
    server.assert_script_used()
