"""``LiteLLMModelClient`` on Amazon Bedrock, against a Converse API on loopback.

LiteLLM sends a Bedrock model's call to ``/model/<id>/converse-stream``, signed
with the AWS credentials of the environment, and reads the answer in the AWS
event stream encoding (``bedrock_scripts``). Bedrock sends its errors either as
an HTTP answer or, once the stream has begun, as an exception event.
"""

from __future__ import annotations

import base64
import json

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
from dex_agents.litellm import LiteLLMModelClient, ModelProviderError, ModelStreamInterruptedError
from tests.adapters.litellm.bedrock_scripts import (
    EVENT_STREAM,
    bedrock_env,
    converse_frames,
    converse_reply,
    exception,
    invoke_reply,
)
from tests.adapters.litellm.provider_server import ProviderServer, frames_reply, json_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.request_cases import IMAGE_BYTES, PNG, PNG_IMAGE

litellm.suppress_debug_info = True

CLAUDE = "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
NOVA = "bedrock/amazon.nova-pro-v1:0"
REQUEST = ModelRequest(instructions="Be brief.", items=(UserTextItem(text="Hi"),))
PNG_BASE64 = base64.b64encode(PNG).decode()
USER = UserTextItem(text="Where is order 7?")
LOOKUP = ModelToolDefinition(
    name="lookup",
    description="Look an order up.",
    parameters_schema={"type": "object", "properties": {"order_id": {"type": "string"}}},
)
SCREENSHOT = ToolResultItem(
    tool_call_id="tooluse_9", tool_name="lookup", output="order 7 shipped", images=(PNG_IMAGE,)
)


def _request(*items: ModelInputItem) -> ModelRequest:
    return ModelRequest(
        instructions="You help with orders.", items=items, tools=(LOOKUP,), image_bytes=IMAGE_BYTES
    )


async def _stream_failure(
    server: ProviderServer, output: RecordingOutput, event: bytes
) -> ModelProviderError:
    """What a call raises whose answer breaks off at ``event`` after its first two frames."""
    frames = converse_frames("Half of an answer that stops.")[:2]
    server.script(frames_reply([*frames, event], EVENT_STREAM))
    with pytest.raises(ModelProviderError) as caught:
        await LiteLLMModelClient(CLAUDE, api_base=server.url).call_model(REQUEST, output)
    server.assert_script_used()
    return caught.value


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock_env(monkeypatch)


@pytest.mark.parametrize("model", [CLAUDE, NOVA])
async def test_a_tool_turn_streams_split_arguments_and_sends_the_results_image(
    server: ProviderServer, output: RecordingOutput, model: str
) -> None:
    server.script(
        converse_reply("Let me check.", [("tooluse_9", "lookup", '{"order_id": "7"}')]),
        converse_reply("It shipped."),
    )
    client = LiteLLMModelClient(model, api_base=server.url)
    first = await client.call_model(_request(USER), output)
    (item,) = first.output
    assert [(c.tool_call_id, c.tool_name, c.arguments) for c in item.tool_calls] == [
        ("tooluse_9", "lookup", '{"order_id": "7"}')
    ]
    assert first.usage == AgentUsage(model_calls=1, input_tokens=60, output_tokens=7)
    await client.call_model(_request(USER, item, SCREENSHOT), output)
    assert server.requests[1].body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"text": "Let me check."},
                {
                    "toolUse": {
                        "input": {"order_id": "7"},
                        "name": "lookup",
                        "toolUseId": "tooluse_9",
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "content": [
                            {"text": "order 7 shipped"},
                            {"image": {"source": {"bytes": PNG_BASE64}, "format": "png"}},
                        ],
                        "toolUseId": "tooluse_9",
                    }
                }
            ],
        },
    ]
    assert output.text() == "Let me check.It shipped."
    server.assert_script_used()


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (429, "ThrottlingException", True),
        (500, "InternalServerException", True),
        (503, "ServiceUnavailableException", True),
        (400, "ValidationException", False),
    ],
)
async def test_an_http_error_keeps_its_status_and_is_retried_when_a_retry_can_help(
    server: ProviderServer, output: RecordingOutput, status: int, kind: str, retryable: bool
) -> None:
    headers = (("x-amzn-ErrorType", f"{kind}:http://internal.amazon.com/coral/"),)
    server.script(json_reply(status, {"message": f"{kind}: no"}, headers=headers))
    with pytest.raises(ModelProviderError) as caught:
        await LiteLLMModelClient(NOVA, api_base=server.url).call_model(REQUEST, output)
    assert (caught.value.status_code, caught.value.retryable) == (status, retryable)
    assert str(caught.value) == f"bedrock model call failed with HTTP {status}: {kind}: no"
    server.assert_script_used()


THROTTLED = "Too many tokens, please wait before trying again."
INVALID_MODEL = "The provided model identifier is invalid."


@pytest.mark.parametrize(
    ("body", "kind_header", "message", "retryable"),
    [
        ({"message": THROTTLED}, "ThrottlingException", THROTTLED, True),
        ({"Message": INVALID_MODEL}, "ValidationException", INVALID_MODEL, False),
        (
            {"__type": "com.amazon.coral.validate#ValidationException", "message": INVALID_MODEL},
            None,
            INVALID_MODEL,
            False,
        ),
        # An error of no named kind may be retried, as one without an HTTP status is.
        ({"message": THROTTLED}, None, THROTTLED, True),
    ],
)
async def test_a_json_error_answered_with_200_keeps_bedrocks_words_and_retry_rule(
    server: ProviderServer,
    output: RecordingOutput,
    body: dict[str, str],
    kind_header: str | None,
    message: str,
    retryable: bool,
) -> None:
    # LiteLLM read the JSON as Bedrock's binary event stream: a retryable "Checksum mismatch".
    headers = () if kind_header is None else (("x-amzn-ErrorType", f"{kind_header}:http://x/"),)
    server.script(json_reply(200, body, headers=headers))
    with pytest.raises(ModelProviderError) as caught:
        await LiteLLMModelClient(NOVA, api_base=server.url).call_model(REQUEST, output)
    assert type(caught.value) is ModelProviderError
    assert (caught.value.status_code, caught.value.retryable) == (None, retryable)
    assert str(caught.value) == f"bedrock model call failed: {message}"
    server.assert_script_used()


@pytest.mark.parametrize(
    ("event", "error", "retryable"),
    [
        # Bedrock's documentation: "An error occurred while streaming the response.
        # Retry your request." LiteLLM files it as an HTTP 424 that no retry passes.
        ("modelStreamErrorException", ModelStreamInterruptedError, True),
        ("throttlingException", ModelStreamInterruptedError, True),
        ("internalServerException", ModelStreamInterruptedError, True),
        ("validationException", ModelProviderError, False),
    ],
)
async def test_an_error_inside_the_stream_is_retried_when_bedrock_says_a_retry_can_help(
    server: ProviderServer,
    output: RecordingOutput,
    event: str,
    error: type[ModelProviderError],
    retryable: bool,
) -> None:
    failure = await _stream_failure(server, output, exception(event, "The stream failed."))
    assert type(failure) is error
    assert failure.retryable is retryable
    assert "The stream failed." in str(failure)


@pytest.mark.parametrize(
    ("status", "model_message", "error", "retryable"),
    [
        (529, "Overloaded", ModelStreamInterruptedError, True),
        (500, "Internal server error", ModelStreamInterruptedError, True),
        (400, "messages.1: text content blocks must be non-empty", ModelProviderError, False),
        # A 4xx of the model's that a retry can pass (its rate limit) is retried.
        (
            429,
            "Too many tokens, please wait before trying again.",
            ModelStreamInterruptedError,
            True,
        ),
        (413, "Request too large", ModelProviderError, False),
    ],
)
async def test_a_model_stream_error_is_retried_unless_the_model_refused_the_request(
    server: ProviderServer,
    output: RecordingOutput,
    status: int,
    model_message: str,
    error: type[ModelProviderError],
    retryable: bool,
) -> None:
    # The event names the model's own status and message; a 4xx of the model's
    # is the same request refused again, and its message says why, not Bedrock's.
    event = exception(
        "modelStreamErrorException",
        f"Received a {status} from the model.",
        originalStatusCode=status,
        originalMessage=model_message,
    )
    failure = await _stream_failure(server, output, event)
    assert type(failure) is error
    assert failure.retryable is retryable
    assert model_message in str(failure)


@pytest.mark.parametrize("cut", [True, False], ids=["connection-cut", "ended-before-messageStop"])
async def test_a_stream_broken_mid_answer_is_a_retryable_break(
    server: ProviderServer, output: RecordingOutput, cut: bool
) -> None:
    frames = converse_frames("Half of an answer that never ends.")
    if cut:
        server.script(frames_reply(frames, EVENT_STREAM, cut_after=2))
    else:
        server.script(frames_reply(frames[:3], EVENT_STREAM))  # a clean end, but no messageStop
    with pytest.raises(ModelStreamInterruptedError) as caught:
        await LiteLLMModelClient(CLAUDE, api_base=server.url).call_model(REQUEST, output)
    assert caught.value.retryable is True
    assert output.deltas  # the answer had started
    server.assert_script_used()


async def test_an_answer_without_usage_is_kept(
    server: ProviderServer, output: RecordingOutput
) -> None:
    server.script(converse_reply("Hello.", usage=None))
    response = await LiteLLMModelClient(NOVA, api_base=server.url).call_model(REQUEST, output)
    assert response.text == "Hello."
    assert response.usage.model_calls == 1
    assert json.loads(response.output[0].item)["content"] == "Hello."
    server.assert_script_used()


@pytest.mark.parametrize("reason", ["malformed_model_output", "malformed_tool_use"])
async def test_an_answer_the_model_failed_to_make_is_a_retryable_failure_naming_the_reason(
    server: ProviderServer, output: RecordingOutput, reason: str
) -> None:
    # LiteLLM reads a stop reason it does not know as "stop": the answer read as
    # a whole (or empty) one, as Gemini's MALFORMED_FUNCTION_CALL did.
    server.script(
        converse_reply(None, [("tooluse_9", "lookup", '{"order_id": ')], stop_reason=reason)
    )
    with pytest.raises(ModelProviderError) as caught:
        await LiteLLMModelClient(CLAUDE, api_base=server.url).call_model(_request(USER), output)
    assert type(caught.value) is ModelProviderError
    assert (caught.value.status_code, caught.value.retryable) == (None, True)
    assert str(caught.value) == (
        f"bedrock model call failed: the model failed to make its answer (finish reason {reason})"
    )
    server.assert_script_used()


@pytest.mark.parametrize("api", ["converse", "invoke"])
async def test_an_answer_the_context_window_stopped_finishes_for_its_length(
    server: ProviderServer, output: RecordingOutput, api: str
) -> None:
    stop = "model_context_window_exceeded"
    if api == "converse":
        server.script(converse_reply("Half of", stop_reason=stop))
        model = CLAUDE
    else:
        # Claude's own events inside Bedrock's binary stream, read as on Anthropic's API.
        server.script(invoke_reply([{"type": "text", "text": "Half of"}], stop_reason=stop))
        model = CLAUDE.replace("bedrock/", "bedrock/invoke/")
    response = await LiteLLMModelClient(model, api_base=server.url).call_model(REQUEST, output)
    assert response.text == "Half of"
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.finish_reasons == ("length",)
    server.assert_script_used()


@pytest.mark.parametrize(("reason", "finish"), [("end_turn", "stop"), ("max_tokens", "length")])
async def test_a_stop_reason_litellm_knows_keeps_its_finish_reason(
    server: ProviderServer, output: RecordingOutput, reason: str, finish: str
) -> None:
    server.script(converse_reply("Hello.", stop_reason=reason))
    response = await LiteLLMModelClient(NOVA, api_base=server.url).call_model(REQUEST, output)
    assert response.text == "Hello."
    assert response.model_call_metadata is not None
    assert response.model_call_metadata.finish_reasons == (finish,)
    server.assert_script_used()
