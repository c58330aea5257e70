"""A Gemini stream that ended cleanly before Gemini finished the answer.

LiteLLM (1.105) marks every chunk of a Gemini stream ``stop`` and ends a stream
whose last chunk had no ``finishReason`` as if it had one, so such a stream read
as a whole answer. The client reads Gemini's own ``finishReason`` off the
stream's HTTP body (``gemini_finish``): without one, the stream broke.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import litellm
import pytest
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

from dex_agents.domain.model_io import ModelRequest, ModelResponse, UserTextItem
from dex_agents.litellm import (
    LiteLLMModelClient,
    ModelProviderError,
    ModelStreamInterruptedError,
)
from tests.adapters.litellm.provider_scripts import gemini_stream
from tests.adapters.litellm.provider_server import ProviderServer, RecordedRequest, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.session_support import KEY
from tests.adapters.litellm.vertex_support import vertex_gemini_token, vertex_options

litellm.suppress_debug_info = True

REQUEST = ModelRequest(instructions="Be brief.", items=(UserTextItem(text="Hi"),))
ANSWER = "Order 7 shipped today and arrives on Friday."


def _client(server: ProviderServer, **options: Any) -> LiteLLMModelClient:
    return LiteLLMModelClient(
        "gemini/gemini-2.5-pro",
        api_base=server.url,
        api_key_provider=lambda: KEY,
        request_options=options or None,
    )


async def test_litellm_marks_every_gemini_chunk_stop(server: ProviderServer) -> None:
    # Why the client reads Gemini's finishReason itself: LiteLLM's chunks and
    # stream wrapper say "stop" whether Gemini finished the answer or not.
    server.script(sse_reply(gemini_stream([{"text": ANSWER}])[:2]))
    stream = await litellm.acompletion(
        model="gemini/gemini-2.5-pro",
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        api_base=server.url,
        api_key=KEY,
        max_retries=0,
    )
    reasons = [choice.finish_reason async for chunk in stream for choice in chunk.choices]
    assert reasons[-1] == "stop"
    assert stream.intermittent_finish_reason == "stop"


@pytest.mark.parametrize("options", [{}, {"timeout": 30}], ids=["default", "timeout"])
async def test_a_gemini_stream_that_ended_before_its_finish_reason_is_a_retryable_break(
    server: ProviderServer, output: RecordingOutput, options: dict[str, Any]
) -> None:
    server.script(sse_reply(gemini_stream([{"text": ANSWER}])[:2]))
    with pytest.raises(ModelStreamInterruptedError) as caught:
        await _client(server, **options).call_model(REQUEST, output)
    assert caught.value.retryable is True
    assert str(caught.value) == "the gemini stream ended before the answer finished"
    assert output.deltas  # the answer had started
    server.assert_script_used()


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("vertex_ai/4965075652664360960", {}),
        ("vertex_ai_beta/4965075652664360960", {}),
    ],
    ids=["psc", "beta"],
)
async def test_a_gemini_endpoint_on_vertex_ai_is_watched_as_gemini(
    server: ProviderServer,
    output: RecordingOutput,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    options: dict[str, Any],
) -> None:
    # LiteLLM sends a tuned or dedicated Gemini's numeric endpoint Gemini's
    # request, and reads its stream as it reads any Gemini stream.
    vertex_gemini_token(monkeypatch)
    server.script(sse_reply(gemini_stream([{"text": ANSWER}])[:2]))
    client = LiteLLMModelClient(
        model, api_base=server.url, request_options={**vertex_options(), **options}
    )
    with pytest.raises(ModelStreamInterruptedError):
        await client.call_model(REQUEST, output)
    assert server.requests[0].path.endswith(
        "/endpoints/4965075652664360960:streamGenerateContent?alt=sse"
    )
    server.assert_script_used()


async def test_a_finished_gemini_answer_is_the_answer(
    server: ProviderServer, output: RecordingOutput
) -> None:
    server.script(sse_reply(gemini_stream([{"text": ANSWER}])))
    response = await _client(server).call_model(REQUEST, output)
    assert response.text == ANSWER
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.finish_reasons == ("stop",)
    server.assert_script_used()


async def test_a_blocked_prompt_is_no_broken_stream(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # Gemini answers a prompt it blocks with no candidate, so no finishReason.
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "modelVersion": "gemini-2.5-pro"}
    server.script(sse_reply([(None, blocked)]))
    response = await _client(server).call_model(REQUEST, output)
    assert response.filtered
    server.assert_script_used()


async def test_gemini_calls_reuse_their_connection(output: RecordingOutput) -> None:
    # The watched client lives as long as LiteLLM's shared one it stands in for,
    # so a Gemini call does not open a connection of its own.
    async with ProviderServer(keep_alive=True) as server:
        events = gemini_stream([{"text": ANSWER}])
        server.script(sse_reply(events), sse_reply(events[:2]), sse_reply(events))
        first, second = _client(server), _client(server)
        assert (await first.call_model(REQUEST, output)).text == ANSWER
        with pytest.raises(ModelStreamInterruptedError):
            await second.call_model(REQUEST, RecordingOutput())
        assert (await first.call_model(REQUEST, RecordingOutput())).text == ANSWER
        server.assert_script_used()
        assert server.connections == 1


async def test_concurrent_gemini_calls_of_one_client_are_each_judged_by_their_own_body(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # The calls share one watched HTTP client (their connections are reused, as with
    # LiteLLM's shared one): each must still read its own stream's finishReason.
    both_sent = asyncio.Event()

    def count(_: RecordedRequest) -> None:
        if len(server.requests) == 2:
            both_sent.set()

    async def second_request_arrived(_: int) -> None:
        await both_sent.wait()

    server.refuse = count

    events = gemini_stream([{"text": ANSWER}])
    server.script(sse_reply(events[:2], before_event=second_request_arrived), sse_reply(events))
    client = _client(server)
    cut, whole = await asyncio.gather(
        client.call_model(REQUEST, output),
        client.call_model(REQUEST, RecordingOutput()),
        return_exceptions=True,
    )
    assert isinstance(cut, ModelStreamInterruptedError)
    assert isinstance(whole, ModelResponse)
    assert whole.text == ANSWER
    server.assert_script_used()


NO_ARGS_CALL = {"functionCall": {"name": "current_time"}}
"""A call of a function without parameters: Gemini's API makes ``args`` optional."""


async def test_a_gemini_function_call_without_args_is_a_call_with_no_arguments(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # LiteLLM (1.105) raised KeyError 'args' for it, a retryable break that every
    # retry met again; the body watch gives the call the empty args it means.
    server.script(sse_reply(gemini_stream([NO_ARGS_CALL])))
    response = await _client(server).call_model(REQUEST, output)
    (item,) = response.output
    (call,) = item.tool_calls
    assert (call.tool_name, call.arguments) == ("current_time", "{}")
    server.assert_script_used()


async def test_an_unwatched_gemini_function_call_without_args_fails_at_once(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # A caller's own client is not watched, so LiteLLM's parser meets the call as sent.
    server.script(sse_reply(gemini_stream([NO_ARGS_CALL])))
    own = AsyncHTTPHandler()
    try:
        with pytest.raises(ModelProviderError) as caught:
            await _client(server, client=own).call_model(REQUEST, output)
    finally:
        await own.close()  # type: ignore[no-untyped-call]  # the caller closes its client
    assert type(caught.value) is ModelProviderError
    assert caught.value.retryable is False
    assert str(caught.value) == (
        "gemini model call failed: LiteLLM could not read the gemini answer: "
        "no field 'args' where it needs one"
    )
    server.assert_script_used()


async def test_a_gemini_stream_the_provider_would_compress_is_read_as_sent(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # The watch reads the body before the HTTP client decodes it: a gzip body read
    # as having no finishReason, so every such answer was a broken stream.
    server.script(
        replace(sse_reply(gemini_stream([{"text": ANSWER}, NO_ARGS_CALL])), compression="gzip")
    )
    response = await _client(server).call_model(REQUEST, output)
    assert response.text == ANSWER
    (item,) = response.output
    assert [call.arguments for call in item.tool_calls] == ["{}"]
    server.assert_script_used()


@pytest.mark.parametrize("reason", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"])
async def test_a_call_the_model_failed_to_make_is_a_retryable_failure_not_an_empty_answer(
    server: ProviderServer, output: RecordingOutput, reason: str
) -> None:
    # Gemini sends no content with these, and LiteLLM maps them to "stop".
    candidate = {"index": 0, "finishReason": reason, "finishMessage": "Malformed function call"}
    data = {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 40, "totalTokenCount": 40},
        "modelVersion": "gemini-2.5-pro",
    }
    server.script(sse_reply([(None, data)]))
    with pytest.raises(ModelProviderError) as caught:
        await _client(server).call_model(REQUEST, output)
    assert caught.value.retryable is True
    assert str(caught.value) == (
        "gemini model call failed: the model failed to make its answer "
        f"(finish reason {reason}: Malformed function call)"
    )
    server.assert_script_used()
