"""LiteLLM's errors, and those of the HTTP clients under it, translated to ``ModelProviderError``.

See ``errors`` for what each kind of failure raises and whether a retry can help.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Final

from dex_agents.adapters.litellm.bedrock_stream_errors import (
    ModelStreamError,
    model_stream_error,
)
from dex_agents.adapters.litellm.error_chains import (
    connect_failure,
    exception_chain,
    refused_before_sending,
    response_headers,
    scrub_exception_chain,
)
from dex_agents.adapters.litellm.errors import (
    ModelProviderError,
    ModelStreamInterruptedError,
    is_retryable_status,
)
from dex_agents.adapters.litellm.provider_messages import describe_failure, provider_message
from dex_agents.adapters.litellm.read_timeouts import StreamReadTimeoutError
from dex_agents.adapters.litellm.redaction import scrub
from dex_agents.adapters.litellm.retry_after import describe_wait, parse_retry_after

TRANSPORT_ERROR_MODULES: Final = frozenset(
    {"litellm", "openai", "anthropic", "httpx", "httpcore", "aiohttp"}
)
"""Packages whose exceptions a model call translates; any other exception passes through."""


def is_transport_error(error: BaseException) -> bool:
    """An exception of LiteLLM or an HTTP client under it, or a timeout or connection error."""
    if isinstance(error, TimeoutError | ConnectionError):
        return True
    return type(error).__module__.split(".", 1)[0] in TRANSPORT_ERROR_MODULES


def _as_status(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _answered_status(error: BaseException) -> int | None:
    """The status of the HTTP client's error in the chain: what the provider answered."""
    for current in exception_chain(error):
        if type(current).__name__ == "HTTPStatusError":
            answered = _as_status(getattr(getattr(current, "response", None), "status_code", None))
            if answered is not None:
                return answered
    return None


def _status_code(error: BaseException) -> int | None:
    """The provider's HTTP status: the HTTP client's answer in the chain, else LiteLLM's.

    LiteLLM files some statuses under another one (Anthropic's 529 "overloaded"
    as 500, 413 as 400); the HTTP client's error keeps what the provider answered,
    which the error shows.
    """
    answered = _answered_status(error)
    return answered if answered is not None else _as_status(getattr(error, "status_code", None))


def translate_error(
    error: Exception, *, provider: str, secrets: Iterable[str], streaming: bool = False
) -> ModelProviderError | None:
    """The ``ModelProviderError`` of a LiteLLM or transport error, or ``None`` for any other.

    ``streaming`` says the answer had started to stream: a connection error then
    is a ``ModelStreamInterruptedError``. The message, and those of ``error`` and
    the exceptions it chains, are scrubbed of ``secrets`` and credential-shaped text.
    """
    known = list(secrets)
    if isinstance(error, ModelProviderError):
        scrub_exception_chain(error, known)  # its text may quote the provider
        return error
    if isinstance(error, StreamReadTimeoutError) and not error.answered:
        text = describe_failure(provider, None, "timed out before the provider answered")
        return ModelProviderError(text, provider=provider, status_code=None, retryable=True)
    if streaming and _undecodable_body(error):
        # The OpenAI SDK decodes each line of a stream itself, and LiteLLM's
        # Responses stream passes its error on bare; its Chat Completions stream
        # files the same as a break, and so does this, on every API.
        scrub_exception_chain(error, known)
        text = f"the {provider} stream broke before the answer ended: {error}"
        return ModelStreamInterruptedError(scrub(text, known), provider=provider)
    if not is_transport_error(error):
        return None
    scrub_exception_chain(error, known)
    raw = str(getattr(error, "message", None) or error) or type(error).__name__
    unreached = connect_failure(error)
    if unreached is not None:
        # Before the stream checks: a stream that never connected did not break.
        text = scrub(describe_failure(provider, None, unreached), known)
        return ModelProviderError(text, provider=provider, status_code=None, retryable=True)
    event = _model_stream_error(error)
    if event is not None:
        if not is_retryable_status(event.original_status):
            # The model refused the request, and a retry sends it again.
            text = scrub(describe_failure(provider, None, event.message), known)
            return ModelProviderError(text, provider=provider, status_code=None, retryable=False)
        text = f"the {provider} stream broke before the answer ended: {event.message}"
        return ModelStreamInterruptedError(scrub(text, known), provider=provider)
    unread = _unreadable_chunk(error) if _is_stream_break(error) else None
    if unread is not None:
        # LiteLLM's parser failed on a field the provider may leave out (Gemini's
        # functionCall without args): every retry reads the same kind of answer.
        text = (
            f"LiteLLM could not read the {provider} answer: no field {unread!r} where it needs one"
        )
        text = scrub(describe_failure(provider, None, text), known)
        return ModelProviderError(text, provider=provider, status_code=None, retryable=False)
    answer = _answer_inside_stream(error)
    if answer is not None:
        # LiteLLM files a content policy violation sent inside a stream as a break,
        # so a fallback model may try, and so it does any HTTP error answer to a
        # Gemini stream's request: neither is a stream that broke.
        answered_status, message = answer
        return _http_failure(error, provider, answered_status, message, known)
    if not streaming and _timed_out(error):
        # LiteLLM files a timeout as an HTTP 408 that no provider sent.
        text = describe_failure(provider, None, "timed out before the provider answered")
        return ModelProviderError(text, provider=provider, status_code=None, retryable=True)
    if _is_stream_break(error) or (streaming and _is_connection_error(error)):
        text = f"the {provider} stream broke before the answer ended: {provider_message(raw)}"
        return ModelStreamInterruptedError(scrub(text, known), provider=provider)
    refused = None if streaming else refused_before_sending(error)
    if refused is not None:
        # LiteLLM wraps it with a made-up HTTP 500, but no provider answered and
        # the same request fails the same way again.
        text = scrub(describe_failure(provider, None, str(refused) or raw), known)
        return ModelProviderError(text, provider=provider, status_code=None, retryable=False)
    status = _status_code(error)
    message = provider_message(raw) if status is not None else f"{type(error).__name__}: {raw}"
    # Whether a retry helps follows LiteLLM's filing, which reads the provider's
    # message too (a throttle sent as a 400 is filed as a 429).
    filed = _as_status(getattr(error, "status_code", None))
    return _http_failure(error, provider, status, message, known, filed)


def _http_failure(
    error: BaseException,
    provider: str,
    status: int | None,
    message: str,
    secrets: list[str],
    filed: int | None = None,
) -> ModelProviderError:
    """The error of a provider's answer with ``status``; a retryable one keeps its ``Retry-After``."""
    retryable = is_retryable_status(status if filed is None else filed)
    wait = _retry_after(error) if retryable and status is not None else None
    text = describe_failure(provider, status, message)
    if wait is not None:
        text = f"{text} (the provider asked to {describe_wait(wait)})"
    return ModelProviderError(
        scrub(text, secrets),
        provider=provider,
        status_code=status,
        retryable=retryable,
        retry_after=wait,
    )


def _retry_after(error: BaseException) -> timedelta | None:
    """The first wait an answer in ``error``'s chain asks for."""
    now = datetime.now(UTC)
    waits = (parse_retry_after(headers, now) for headers in response_headers(error))
    return next((wait for wait in waits if wait is not None), None)


_STREAM_BREAK_NAMES: Final = (
    "MidStreamFallbackError",
    "ReadError",
    "ClientPayloadError",
    "RemoteProtocolError",
)


def _answer_inside_stream(error: BaseException) -> tuple[int, str] | None:
    """The status and message of an answer that LiteLLM filed as a stream break.

    A 4xx a retry cannot pass (a content policy violation sent inside the
    stream), or any HTTP error status that answered the stream's request
    (Gemini's, whose request LiteLLM sends once the stream is read).
    """
    original = getattr(error, "original_exception", None)
    if type(error).__name__ != "MidStreamFallbackError" or not isinstance(original, Exception):
        return None
    status = _as_status(getattr(original, "status_code", None))
    if status is None:
        return None
    if is_retryable_status(status):
        answered = _answered_status(error)
        if answered is None or answered < 400:
            return None
        status = answered
    raw = str(getattr(original, "message", None) or original) or type(original).__name__
    return status, provider_message(raw)


def _unreadable_chunk(error: BaseException) -> str | None:
    """The field LiteLLM's stream parser missed (a ``KeyError`` in ``error``'s chain), or ``None``."""
    for current in exception_chain(error):
        if type(current) is KeyError and len(current.args) == 1:
            return str(current.args[0])
    return None


def _model_stream_error(error: BaseException) -> ModelStreamError | None:
    """The ``modelStreamErrorException`` of a ``BedrockError`` in ``error``'s chain, or ``None``."""
    for current in exception_chain(error):
        if type(current).__name__ == "BedrockError":
            event = model_stream_error(str(getattr(current, "message", None) or current))
            if event is not None:
                return event
    return None


_TIMEOUT_NAMES: Final = frozenset({"Timeout", "APITimeoutError", "TimeoutException"})
"""LiteLLM's, the OpenAI SDK's and httpx's timeouts (httpx's read, connect, write and pool)."""


def _timed_out(error: BaseException) -> bool:
    """No answer came in time: a timeout in the chain, and no HTTP status the provider answered."""
    if _answered_status(error) is not None or _is_stream_break(error):
        return False
    return any(
        isinstance(current, TimeoutError)
        or any(kind.__name__ in _TIMEOUT_NAMES for kind in type(current).__mro__)
        for current in exception_chain(error)
    )


def _is_connection_error(error: BaseException) -> bool:
    """No HTTP answer at all: LiteLLM's ``APIConnectionError``, or a transport error without status."""
    return type(error).__name__ == "APIConnectionError" or _status_code(error) is None


def _undecodable_body(error: BaseException) -> bool:
    """A body that is no UTF-8 text, which the SDK or LiteLLM failed to decode as it read it.

    Such as one compressed in an encoding no decoder here reads (``br``).
    """
    if not isinstance(error, UnicodeDecodeError):
        return False
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    module = None if traceback is None else traceback.tb_frame.f_globals.get("__name__")
    return isinstance(module, str) and module.split(".", 1)[0] in TRANSPORT_ERROR_MODULES


def _is_stream_break(error: BaseException) -> bool:
    """A connection that broke while the answer streamed (LiteLLM, httpx and aiohttp names)."""
    return type(error).__name__ in _STREAM_BREAK_NAMES
