"""Provider failures through LiteLLM: the errors the client raises, and what they never show."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable

import litellm
import pytest

from dex_agents.adapters.litellm.routing import ModelApi
from dex_agents.adapters.litellm.streams import read_chat_stream, read_responses_stream
from dex_agents.domain.model_io import ModelRequest, UserTextItem
from dex_agents.litellm import (
    ApiKeyProvider,
    LiteLLMModelClient,
    ModelProviderError,
    ModelStreamInterruptedError,
)
from tests.adapters.litellm.provider_scripts import (
    anthropic_error,
    anthropic_stream,
    chat_stream,
    message_item,
    openai_error,
    responses_stream,
)
from tests.adapters.litellm.provider_server import ProviderServer, Reply, json_reply, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput

litellm.suppress_debug_info = True

KEY = "sk-proj-TESTKEY0123456789abcdef"
PLAIN_KEY = "tenant-key-0123456789abcdef"
REQUEST = ModelRequest(instructions="Be brief.", items=(UserTextItem(text="Hi"),))


def clients(
    server: ProviderServer, key: str = KEY, key_provider: ApiKeyProvider | None = None
) -> dict[str, LiteLLMModelClient]:
    provider = key_provider or (lambda: key)
    return {
        "responses": LiteLLMModelClient(
            "openai/gpt-5-mini", api_base=server.url + "/v1", api_key_provider=provider
        ),
        "chat": LiteLLMModelClient(
            "openai/gpt-4.1",
            api="chat_completions",
            api_base=server.url + "/v1",
            api_key_provider=provider,
        ),
        "anthropic": LiteLLMModelClient(
            "anthropic/claude-sonnet-4-5", api_base=server.url, api_key_provider=provider
        ),
    }


APIS = ["responses", "chat", "anthropic"]


def _everything_shown(error: BaseException) -> str:
    return str(error) + repr(error) + "".join(traceback.format_exception(error))


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("key", [KEY, PLAIN_KEY], ids=["sk-key", "plain-key"])
async def test_an_auth_error_that_echoes_the_key_never_shows_it(
    server: ProviderServer, output: RecordingOutput, api: str, key: str
) -> None:
    echo = f"Incorrect API key provided: {key}. Authorization: Bearer {key}"
    reply = (
        openai_error(401, echo)
        if api != "anthropic"
        else anthropic_error(401, "authentication_error", echo)
    )
    server.script(reply)
    with pytest.raises(ModelProviderError) as caught:
        await clients(server, key)[api].call_model(REQUEST, output)
    error = caught.value
    assert (error.status_code, error.retryable) == (401, False)
    # LiteLLM masks the key itself on some paths ("REDACTED"); the client on all.
    assert str(error).startswith(
        f"{error.provider} model call failed with HTTP 401: Incorrect API key provided: "
    )
    assert key not in _everything_shown(error)
    assert key[6:20] not in _everything_shown(error)
    assert len(server.requests) == 1


async def test_a_key_from_the_environment_is_sent_and_scrubbed(
    server: ProviderServer, output: RecordingOutput, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLAIN_KEY)
    server.script(openai_error(403, f"key {PLAIN_KEY} may not use this model"))
    client = LiteLLMModelClient("openai/gpt-5-mini", api_base=server.url + "/v1")
    with pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    assert server.requests[0].headers["authorization"] == f"Bearer {PLAIN_KEY}"
    assert str(caught.value) == (
        "openai model call failed with HTTP 403: key [redacted] may not use this model"
    )
    assert PLAIN_KEY not in _everything_shown(caught.value)


CONTEXT = "This model's maximum context length is 128000 tokens."


@pytest.mark.parametrize("api", APIS)
async def test_a_bad_request_is_not_retryable_and_keeps_the_providers_message(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    reply = (
        openai_error(400, CONTEXT, "context_length_exceeded")
        if api != "anthropic"
        else anthropic_error(400, "invalid_request_error", CONTEXT)
    )
    server.script(reply)
    with pytest.raises(ModelProviderError) as caught:
        await clients(server)[api].call_model(REQUEST, output)
    provider = "anthropic" if api == "anthropic" else "openai"
    assert str(caught.value) == f"{provider} model call failed with HTTP 400: {CONTEXT}"
    assert caught.value.retryable is False


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", [429, 500, 503, 529])
async def test_rate_limits_and_server_errors_are_retryable_and_sent_once(
    server: ProviderServer, output: RecordingOutput, api: str, status: int
) -> None:
    message = "Rate limit reached" if status == 429 else "The server had an error"
    reply = (
        openai_error(status, message)
        if api != "anthropic"
        else anthropic_error(status, "api_error", message)
    )
    server.script(reply)
    with pytest.raises(ModelProviderError) as caught:
        await clients(server)[api].call_model(REQUEST, output)
    assert (caught.value.status_code, caught.value.retryable) == (status, True)
    assert message in str(caught.value)
    assert len(server.requests) == 1  # LiteLLM's own retries are off


def _cut(api: str) -> Reply:
    if api == "responses":
        events = responses_stream([message_item("msg_1", "Half of an answer that never ends")])
    elif api == "chat":
        events = chat_stream("Half of an answer that never ends")
    else:
        events = anthropic_stream([{"type": "text", "text": "Half of an answer that never ends"}])
    return sse_reply(events, cut_after=len(events) - 3)


def _unfinished(api: str) -> Reply:
    """A stream that ends cleanly, but before the provider said the answer ended."""
    if api == "responses":
        events = responses_stream([message_item("msg_1", "An answer without its end")])[:-1]
    elif api == "chat":
        events = [e for e in chat_stream("An answer without its end") if e[1] != "[DONE]"][:-3]
    else:
        events = anthropic_stream([{"type": "text", "text": "An answer without its end"}])[:-3]
    return sse_reply(events)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("break_stream", [_cut, _unfinished], ids=["cut", "unfinished"])
async def test_a_broken_stream_raises_a_retryable_error_and_returns_nothing(
    server: ProviderServer, output: RecordingOutput, api: str, break_stream: object
) -> None:
    assert callable(break_stream)
    server.script(break_stream(api))
    with pytest.raises(ModelStreamInterruptedError) as caught:
        await clients(server)[api].call_model(REQUEST, output)
    assert caught.value.retryable is True
    assert "stream" in str(caught.value)
    assert output.deltas  # text streamed, but no response came back


async def test_a_chat_answer_that_ended_in_error_says_so_without_litellms_chunk(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # A gateway (OpenRouter) ends an answer that failed upstream with finish_reason
    # "error"; LiteLLM raises with the chunk's repr appended, which read as the
    # provider's message.
    events = chat_stream("Half of an answer")[:3]
    _, last = events[-1]
    assert isinstance(last, dict)
    choice = {"index": 0, "delta": {"content": ""}, "finish_reason": "error"}
    events += [(None, {**last, "choices": [choice]}), (None, "[DONE]")]
    server.script(sse_reply(events))
    with pytest.raises(ModelStreamInterruptedError) as caught:
        await clients(server)["chat"].call_model(REQUEST, output)
    assert str(caught.value) == (
        "the openai stream broke before the answer ended: "
        "openai raised a streaming error - finish_reason: error, no content string given"
    )


@pytest.mark.parametrize(
    ("code", "status", "kind", "retryable"),
    [
        ("content_policy_violation", 400, ModelProviderError, False),
        ("server_error", None, ModelStreamInterruptedError, True),
    ],
)
async def test_an_error_inside_a_responses_stream_is_retried_only_when_a_retry_can_help(
    server: ProviderServer,
    output: RecordingOutput,
    code: str,
    status: int | None,
    kind: type[ModelProviderError],
    retryable: bool,
) -> None:
    # LiteLLM files a content policy violation as a stream break, for a fallback model.
    events = responses_stream([message_item("msg_1", "Half of an answer")])[:-1]
    error = {"type": "invalid_request_error", "code": code, "message": "Flagged.", "param": None}
    events.append(("error", {"type": "error", "sequence_number": len(events), "error": error}))
    server.script(sse_reply(events))
    with pytest.raises(ModelProviderError) as caught:
        await clients(server)["responses"].call_model(REQUEST, output)
    assert type(caught.value) is kind
    assert (caught.value.status_code, caught.value.retryable) == (status, retryable)
    assert str(caught.value).endswith("Flagged.")


@pytest.mark.parametrize("api", APIS)
async def test_an_api_key_provider_error_shows_no_secret_and_sends_nothing(
    server: ProviderServer, output: RecordingOutput, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    monkeypatch.setenv("VAULT_TOKEN", PLAIN_KEY)

    async def failing_vault() -> str:
        raise RuntimeError(f"vault {PLAIN_KEY} refused to read {KEY}")

    with pytest.raises(RuntimeError) as caught:
        await clients(server, key_provider=failing_vault)[api].call_model(REQUEST, output)
    assert str(caught.value) == "vault [redacted] refused to read [redacted]"
    assert not server.requests


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("bad_key", [KEY + "\n", " " + KEY, "sk-proj\tTESTKEY", "   "])
async def test_a_key_with_whitespace_is_refused_before_any_request(
    server: ProviderServer, output: RecordingOutput, api: str, bad_key: str
) -> None:
    # A key read from a file keeps its newline; no header may carry it.
    client = clients(server, bad_key)[api]
    with pytest.raises(ValueError, match="key with whitespace") as caught:
        await client.call_model(REQUEST, output)
    assert str(caught.value) == (
        f"api_key_provider of {client.model} returned a key with whitespace or control characters"
    )
    assert not server.requests


@pytest.mark.parametrize(
    ("model", "api", "environment", "message"),
    [
        ("openai/gpt-4.1", "chat_completions", "OPENAI_API_KEY", "Missing credentials. "),
        ("gemini/gemini-2.5-pro", None, "GEMINI_API_KEY", "Missing Gemini API key. "),
    ],
)
async def test_a_missing_key_fails_at_once_without_an_http_status(
    server: ProviderServer,
    output: RecordingOutput,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    api: ModelApi | None,
    environment: str,
    message: str,
) -> None:
    # LiteLLM reports the SDK's refusal to send as an HTTP 500, which RunModel retried.
    for name in (environment, "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    client = LiteLLMModelClient(model, api=api, api_base=server.url + "/v1")
    with pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    error = caught.value
    assert (error.status_code, error.retryable) == (None, False)
    assert str(error).startswith(f"{client.provider} model call failed: {message}")
    assert not server.requests


class _FailingStream:
    """A LiteLLM stream that breaks at its first chunk, and records being closed."""

    def __init__(self) -> None:
        self.closed = False

    def __aiter__(self) -> _FailingStream:
        return self

    async def __anext__(self) -> object:
        raise ConnectionResetError("peer went away")

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("read", [read_responses_stream, read_chat_stream])
async def test_a_stream_that_breaks_is_closed_before_the_error_is_raised(
    output: RecordingOutput, read: Callable[..., Awaitable[object]]
) -> None:
    stream = _FailingStream()
    with pytest.raises(ConnectionResetError):
        await read(stream, output, "openai")
    assert stream.closed


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (429, "RESOURCE_EXHAUSTED", True),
        (503, "UNAVAILABLE", True),
        (400, "INVALID_ARGUMENT", False),
    ],
)
async def test_a_gemini_http_error_keeps_its_status_and_is_no_broken_stream(
    server: ProviderServer, output: RecordingOutput, status: int, kind: str, retryable: bool
) -> None:
    # LiteLLM sends a Gemini stream's request once the stream is read, and files
    # the error status it answers as a break of that stream, with no status.
    message = "Resource has been exhausted (e.g. check quota)."
    server.script(
        json_reply(status, {"error": {"code": status, "message": message, "status": kind}})
    )
    client = LiteLLMModelClient(
        "gemini/gemini-2.5-pro", api_base=server.url, api_key_provider=lambda: KEY
    )
    with pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    assert type(caught.value) is ModelProviderError
    assert (caught.value.status_code, caught.value.retryable) == (status, retryable)
    assert str(caught.value) == f"gemini model call failed with HTTP {status}: {message}"
    assert len(server.requests) == 1


async def test_a_gemini_error_inside_a_200_stream_shows_geminis_words(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # LiteLLM files it as "Vertex_ai_betaException BadRequestError - <status> - <message>".
    error = {
        "code": 400,
        "message": "Request contains an invalid argument.",
        "status": "INVALID_ARGUMENT",
    }
    server.script(sse_reply([(None, {"error": error})]))
    client = LiteLLMModelClient(
        "gemini/gemini-2.5-pro", api_base=server.url, api_key_provider=lambda: KEY
    )
    with pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    assert (caught.value.status_code, caught.value.retryable) == (400, False)
    assert str(caught.value) == (
        "gemini model call failed with HTTP 400: "
        "INVALID_ARGUMENT - Request contains an invalid argument."
    )


@pytest.mark.parametrize("api", APIS)
async def test_a_call_that_times_out_says_so_without_an_http_status(
    output: RecordingOutput, api: str
) -> None:
    # LiteLLM files a timeout as an HTTP 408, which no provider sent.
    release = asyncio.Event()
    handlers: list[asyncio.Task[None]] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        await release.wait()  # never answers while the client waits
        writer.close()

    provider = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{provider.sockets[0].getsockname()[1]}"
    options = {"timeout": 0.3}
    client = {
        "responses": lambda: LiteLLMModelClient(
            "openai/gpt-5-mini",
            api_base=url + "/v1",
            api_key_provider=lambda: KEY,
            request_options=options,
        ),
        "chat": lambda: LiteLLMModelClient(
            "openai/gpt-4.1",
            api="chat_completions",
            api_base=url + "/v1",
            api_key_provider=lambda: KEY,
            request_options=options,
        ),
        "anthropic": lambda: LiteLLMModelClient(
            "anthropic/claude-sonnet-4-5",
            api_base=url,
            api_key_provider=lambda: KEY,
            request_options=options,
        ),
    }[api]()
    async with provider:
        with pytest.raises(ModelProviderError) as caught:
            await client.call_model(REQUEST, output)
        release.set()
        await asyncio.gather(*handlers)
    assert handlers  # the request reached the provider, which never answered
    assert (caught.value.status_code, caught.value.retryable) == (None, True)
    assert str(caught.value) == (
        f"{client.provider} model call failed: timed out before the provider answered"
    )
