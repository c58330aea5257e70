"""The token estimate, credential scrubbing, and how provider errors read and retry."""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Callable

import httpx
import pytest
from litellm.exceptions import (
    APIConnectionError,
    BadRequestError,
    InternalServerError,
    ServiceUnavailableError,
    Timeout,
)

from dex_agents.adapters.litellm.error_chains import connect_failure
from dex_agents.adapters.litellm.error_translation import translate_error
from dex_agents.adapters.litellm.errors import (
    ModelProviderError,
    ModelStreamInterruptedError,
    is_retryable_status,
)
from dex_agents.adapters.litellm.estimates import estimate_input_tokens
from dex_agents.adapters.litellm.provider_messages import describe_failure, provider_message
from dex_agents.adapters.litellm.redaction import (
    REDACTED,
    environment_secrets,
    redact_url,
    scrub,
)
from dex_agents.adapters.litellm.routing import ModelRoute
from dex_agents.domain.model_io import (
    ModelRequest,
    ModelToolDefinition,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.token_estimates import estimate_text_tokens
from tests.adapters.litellm.request_cases import (
    ANTHROPIC,
    ANTHROPIC_ITEM,
    GEMINI,
    JPEG_IMAGE,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PNG_IMAGE,
)

IMAGES = UserTextItem(text="abc", images=(PNG_IMAGE, JPEG_IMAGE))
RESULT = ToolResultItem(
    tool_call_id="call_1", tool_name="screenshot", output="Took it.", images=(PNG_IMAGE,)
)


def test_each_image_sent_counts_1600_tokens_and_gemini_tool_images_count_none() -> None:
    request = ModelRequest(instructions="Be brief.", items=(IMAGES, RESULT))
    text = estimate_text_tokens("Be brief.") + estimate_text_tokens("abc")
    assert estimate_input_tokens(request, OPENAI_RESPONSES) == (
        text + estimate_text_tokens("Took it.") + 3 * 1600
    )
    omitted = (
        "Took it.\n\n[The tool returned 1 image; this model does not receive images "
        "from tool results.]"
    )
    assert estimate_input_tokens(request, GEMINI) == (
        text + estimate_text_tokens(omitted) + 2 * 1600
    )


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        (ANTHROPIC, estimate_text_tokens(ANTHROPIC_ITEM.item)),
        (
            OPENAI_CHAT,
            estimate_text_tokens("Taking one.") + estimate_text_tokens('screenshot{"page":"home"}'),
        ),
    ],
)
def test_output_items_count_as_they_replay(route: ModelRoute, expected: int) -> None:
    request = ModelRequest(instructions="", items=(ANTHROPIC_ITEM,))
    assert estimate_input_tokens(request, route) == expected


def test_tool_definitions_count() -> None:
    tool = ModelToolDefinition(name="lookup", description="Find.", parameters_schema={"a": [1]})
    request = ModelRequest(instructions="", items=(), tools=(tool,))
    assert estimate_input_tokens(request, OPENAI_CHAT) == sum(
        estimate_text_tokens(text) for text in ("lookup", "Find.", '{"a":[1]}')
    )


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        (
            "Incorrect API key provided: sk-proj-abcdef0123456789.",
            (),
            f"Incorrect API key provided: {REDACTED}.",
        ),
        ("Authorization: Bearer abc.def-123", (), f"Authorization: Bearer {REDACTED}"),
        ("{'x-api-key': 'plainvalue99'}", (), f"{{'x-api-key': '{REDACTED}'}}"),
        ('{"api_key": "hunter2hunter2"}', (), f'{{"api_key": "{REDACTED}"}}'),
        ("GET /v1/models?key=AIzaFAKE&alt=sse", (), f"GET /v1/models?key={REDACTED}&alt=sse"),
        ("id AKIAABCDEFGHIJKLMNOP used", (), f"id {REDACTED} used"),
        ("my key is tenant-key-0123456789 ok", ("tenant-key-0123456789",), f"my key is {REDACTED} ok"),
        ("short keys like abc stay", ("abc",), "short keys like abc stay"),
        ("This model's maximum context length is 128000 tokens.", (), "This model's maximum context length is 128000 tokens."),
    ],
)  # fmt: skip
def test_scrub(text: str, secrets: tuple[str, ...], expected: str) -> None:
    assert scrub(text, secrets) == expected


def test_environment_secrets_are_the_credential_like_variables() -> None:
    environment = {
        "OPENAI_API_KEY": "sk-one-0123456789",
        "AWS_SECRET_ACCESS_KEY": "secret-two-0123",
        "HF_TOKEN": "hf_three_0123",
        "HOME": "/home/agent-user",
        "SHORT_TOKEN": "abc",
    }
    assert environment_secrets(environment) == [
        "sk-one-0123456789",
        "secret-two-0123",
        "hf_three_0123",
    ]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.example.com/v1", "https://api.example.com/v1"),
        ("https://user:pw@proxy.example.com/v1", f"https://{REDACTED}@proxy.example.com/v1"),
        ("https://x.example.com/v1?key=abc&v=2", f"https://x.example.com/v1?key={REDACTED}&v={REDACTED}"),
    ],
)  # fmt: skip
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'BadRequestError: AnthropicException - b\'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}\'',
            "prompt is too long: 210000 tokens > 200000 maximum",
        ),
        (
            'BadRequestError: AnthropicException - b\'{"error": {"message": "This model\\\'s limit is 8 tokens."}}\'',
            "This model's limit is 8 tokens.",
        ),
        (
            'litellm.AuthenticationError: AuthenticationError: OpenAIException - {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}',
            "Incorrect API key provided",
        ),
        (
            "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for gpt-5",
            "Rate limit reached for gpt-5",
        ),
        ('BadRequestError: VertexAIException - {"error": {"code": 400, "message": "Invalid argument", "status": "INVALID_ARGUMENT"}}', "Invalid argument"),
        (
            "litellm.ContextWindowExceededError: litellm.BadRequestError: AnthropicError - prompt is too long",
            "prompt is too long",
        ),
        (
            "litellm.MidStreamFallbackError: litellm.InternalServerError: AnthropicError - Overloaded",
            "Overloaded",
        ),
        (
            "litellm.BadRequestError: Vertex_ai_betaException BadRequestError - INVALID_ARGUMENT - Invalid argument.",
            "INVALID_ARGUMENT - Invalid argument.",
        ),
        ("AzureException BadRequestError - The prompt was filtered.", "The prompt was filtered."),
        ("Vertex_aiException ContentPolicyViolationError - The response was blocked.", "The response was blocked."),
        ('{"detail": "Not Found"}', "Not Found"),
        ("plain text", "plain text"),
    ],
)  # fmt: skip
def test_provider_message_is_the_providers_own_words(text: str, message: str) -> None:
    assert provider_message(text) == message


def test_describe_failure() -> None:
    assert describe_failure("anthropic", 400, "too long") == (
        "anthropic model call failed with HTTP 400: too long"
    )
    assert describe_failure("openai", None, "ReadError: eof") == (
        "openai model call failed: ReadError: eof"
    )


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (None, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (413, False),
        (422, False),
        (408, True),
        (409, True),
        (425, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (529, True),
    ],
)
def test_which_statuses_a_retry_can_help(status: int | None, retryable: bool) -> None:
    assert is_retryable_status(status) is retryable


REFUSED = "Cannot connect to host api.example.com:443 ssl:<ssl.SSLContext object at 0x7f1> [Connect call failed ('10.0.0.1', 443)]"
UNREACHED = "could not connect: Cannot connect to host api.example.com:443 [Connect call failed ('10.0.0.1', 443)]"


def chained(first: Exception, *rest: BaseException, context: bool = False) -> Exception:
    """``first`` raised from ``rest[0]``, raised from ``rest[1]``, ..."""
    for outer, inner in itertools.pairwise((first, *rest)):
        if context:
            outer.__context__ = inner
        else:
            outer.__cause__ = inner
    return first


def litellm_error(kind: Callable[..., Exception], message: str) -> Exception:
    return kind(message=message, llm_provider="openai", model="gpt-4.1")


@pytest.mark.parametrize(
    ("make", "failure"),
    [
        (lambda: chained(litellm_error(InternalServerError, "Connection error."), httpx.ConnectError(REFUSED)), UNREACHED),
        (lambda: chained(litellm_error(APIConnectionError, "Connection error."), httpx.ConnectError(REFUSED)), UNREACHED),
        (lambda: chained(litellm_error(ServiceUnavailableError, "down"), ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")), "could not connect: [Errno 111] Connect call failed ('127.0.0.1', 9)"),
        (lambda: chained(litellm_error(InternalServerError, "x"), socket.gaierror(-2, "Name or service not known"), context=True), "could not connect: [Errno -2] Name or service not known"),
        (lambda: httpx.ConnectError("Cannot connect to host h:1 ssl:default [Connect call failed]"), "could not connect: Cannot connect to host h:1 [Connect call failed]"),
        (lambda: httpx.ConnectError(""), "could not connect: ConnectError"),
        (lambda: litellm_error(APIConnectionError, "Unable to convert openai tool calls"), None),
        (lambda: litellm_error(InternalServerError, "The server had an error."), None),
        (lambda: chained(litellm_error(APIConnectionError, "eof"), httpx.ReadError("eof")), None),
        (lambda: httpx.ConnectTimeout("timed out"), None),
    ],
    ids=["openai-chat", "azure", "bedrock-refused", "dns-as-context", "ssl-default", "no-text", "litellm-catch-all", "real-500", "read-error", "connect-timeout"],
)  # fmt: skip
def test_a_connection_never_made_is_found_in_the_chain(
    make: Callable[[], Exception], failure: str | None
) -> None:
    assert connect_failure(make()) == failure


@pytest.mark.parametrize("streaming", [False, True], ids=["before-stream", "stream-started"])
def test_a_connection_never_made_has_no_http_status_and_is_retried(streaming: bool) -> None:
    error = chained(
        litellm_error(InternalServerError, "Connection error."), httpx.ConnectError(REFUSED)
    )
    translated = translate_error(error, provider="openai", secrets=(), streaming=streaming)
    assert type(translated) is ModelProviderError
    assert translated.status_code is None
    assert translated.retryable is True
    assert str(translated) == f"openai model call failed: {UNREACHED}"


@pytest.mark.parametrize(
    ("make", "streaming", "kind", "status", "retryable"),
    [
        (lambda: litellm_error(InternalServerError, "The server had an error."), False, ModelProviderError, 500, True),
        (lambda: litellm_error(BadRequestError, "too long"), False, ModelProviderError, 400, False),
        (lambda: chained(litellm_error(APIConnectionError, "eof"), httpx.ReadError("eof")), True, ModelStreamInterruptedError, None, True),
        # Only a plain ValueError means refused before sending; a body that is not JSON was an answer.
        (lambda: chained(litellm_error(InternalServerError, "bad gateway"), json.JSONDecodeError("no JSON", "<html>", 0)), False, ModelProviderError, 500, True),
        (lambda: chained(litellm_error(APIConnectionError, "no key"), ValueError("Missing Gemini API key.")), False, ModelProviderError, None, False),
        (lambda: chained(litellm_error(InternalServerError, "x"), ModuleNotFoundError("No module named 'google.auth'")), False, ModelProviderError, None, False),
        # LiteLLM files a timeout as an HTTP 408 that no provider sent; a real 408 keeps it.
        (lambda: chained(litellm_error(Timeout, "Connection timed out."), httpx.ReadTimeout("timed out")), False, ModelProviderError, None, True),
        (lambda: chained(litellm_error(Timeout, "Request timed out."), TimeoutError()), False, ModelProviderError, None, True),
        (lambda: chained(litellm_error(Timeout, "Request Timeout"), _http_status_error(408)), False, ModelProviderError, 408, True),
    ],
    ids=["real-500", "bad-request", "stream-cut", "html-500", "missing-key", "missing-package", "timeout", "asyncio-timeout", "real-408"],
)  # fmt: skip
def test_http_answers_and_cut_streams_keep_their_status(
    make: Callable[[], Exception], streaming: bool, kind: type, status: int | None, retryable: bool
) -> None:
    translated = translate_error(make(), provider="openai", secrets=(), streaming=streaming)
    assert type(translated) is kind
    assert translated is not None
    assert translated.status_code == status
    assert translated.retryable is retryable


def _http_status_error(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "https://api.example.com/v1/chat/completions")
    response = httpx.Response(status, request=request)
    return httpx.HTTPStatusError(f"HTTP {status}", request=request, response=response)


def test_a_timeout_says_no_answer_came_and_shows_no_http_status() -> None:
    error = chained(litellm_error(Timeout, "Connection timed out."), httpx.ReadTimeout("timed out"))
    translated = translate_error(error, provider="anthropic", secrets=())
    assert str(translated) == "anthropic model call failed: timed out before the provider answered"
