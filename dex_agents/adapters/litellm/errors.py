"""Errors of the LiteLLM client, and LiteLLM's errors translated to them.

::

    DexAgentsError
    └── ModelCallError (dex_agents.ports.errors)
        └── ModelProviderError         a provider refused or failed one model call
            └── ModelStreamInterruptedError  the answer's stream ended before the answer did

``ModelProviderError.retryable`` says whether the same request may succeed
later: ``False`` for a 4xx a retry cannot fix (bad request, authentication,
permission, not found, context too long) and for a call refused before anything
was sent (a missing key), ``True`` for 408, 409, 425, 429, any 5xx, timeouts
and dropped connections. A retryable one keeps the wait the provider asked for
(``Retry-After``, ``retry-after-ms``) as ``retry_after`` and names it in its
message, so ``RunModel`` waits that long before its next attempt. The message
is the provider's own, without credentials, so the session can show it as the
turn's ``last_turn_error``.
A call that could not connect, or that timed out before an answer (LiteLLM
files it as an HTTP 408), has no HTTP status and says so. A stream that
breaks mid-answer raises, so no half answer is ever returned; so does a
stream error the provider says a retry can help (Bedrock's
``modelStreamErrorException``), a retryable break, unless the model it names
refused the request itself (``bedrock_stream_errors``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

from dex_agents.adapters.litellm.bedrock_stream_errors import (
    ModelStreamError,
    model_stream_error,
)
from dex_agents.adapters.litellm.provider_messages import describe_failure, provider_message
from dex_agents.adapters.litellm.read_timeouts import StreamReadTimeoutError
from dex_agents.adapters.litellm.redaction import scrub
from dex_agents.adapters.litellm.retry_after import describe_wait, parse_retry_after
from dex_agents.ports.errors import ModelCallError

RETRYABLE_STATUS_CODES: Final = frozenset({408, 409, 425, 429})
"""The 4xx statuses that a later attempt of the same request may pass."""

TRANSPORT_ERROR_MODULES: Final = frozenset(
    {"litellm", "openai", "anthropic", "httpx", "httpcore", "aiohttp"}
)
"""Packages whose exceptions a model call translates; any other exception passes through."""


class ModelProviderError(ModelCallError):
    """A provider refused or failed one model call.

    ``provider`` is LiteLLM's name for it, ``status_code`` the HTTP status when
    there was one, ``retryable`` whether the same request may succeed later, and
    ``retry_after`` the wait the provider asked for before it (``Retry-After``).
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None,
        retryable: bool,
        retry_after: timedelta | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code
        self.retryable = retryable
        self.retry_after = retry_after


class ModelStreamInterruptedError(ModelProviderError):
    """The answer's stream ended, or broke, before the provider finished the answer."""

    def __init__(self, message: str, *, provider: str) -> None:
        super().__init__(message, provider=provider, status_code=None, retryable=True)


def is_retryable_status(status_code: int | None) -> bool:
    """``True`` for no status, 408, 409, 425, 429 and 5xx; ``False`` for other 4xx."""
    if status_code is None or status_code >= 500 or status_code < 400:
        return True
    return status_code in RETRYABLE_STATUS_CODES


def is_transport_error(error: BaseException) -> bool:
    """An exception of LiteLLM or an HTTP client under it, or a timeout or connection error."""
    if isinstance(error, TimeoutError | ConnectionError):
        return True
    return type(error).__module__.split(".", 1)[0] in TRANSPORT_ERROR_MODULES


_CONNECT_FAILURE_NAMES: Final = frozenset(
    {"ConnectError", "ClientConnectorError", "ConnectionRefusedError", "gaierror"}
)
"""Exceptions of httpx, httpcore, aiohttp and the standard library that mean no connection was made."""

_SSL_CONTEXT: Final = re.compile(r" ssl:(?:<[^>]*>|\S+)")


def exception_chain(error: BaseException) -> list[BaseException]:
    """``error`` and every exception it chains (causes and contexts), outermost first."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        chain.append(current)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return chain


def connect_failure(error: BaseException) -> str | None:
    """What went wrong when ``error``, or an exception it chains, says no connection was made.

    LiteLLM reports a refused connection or an unknown host as an error with a
    made-up HTTP status (500, 503), so the chain's transport error decides.
    ``None`` when no connection failure is in the chain.
    """
    for current in exception_chain(error):
        if any(cls.__name__ in _CONNECT_FAILURE_NAMES for cls in type(current).__mro__):
            text = _SSL_CONTEXT.sub("", str(current)).strip()
            return f"could not connect: {text or type(current).__name__}"
    return None


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


def response_headers(error: BaseException) -> Iterator[Mapping[str, str]]:
    """The headers of each provider answer in ``error``'s chain, the HTTP clients' first.

    LiteLLM's own error drops them, or holds a placeholder response; the HTTP
    client's error it chains keeps the answer, and LiteLLM keeps a copy as
    ``litellm_response_headers``.
    """
    chain = exception_chain(error)
    for current in chain:
        headers = getattr(getattr(current, "response", None), "headers", None)
        if isinstance(headers, Mapping) and headers:
            yield headers
    for current in chain:
        headers = getattr(current, "litellm_response_headers", None)
        if isinstance(headers, Mapping) and headers:
            yield headers


def _retry_after(error: BaseException) -> timedelta | None:
    """The first wait an answer in ``error``'s chain asks for."""
    now = datetime.now(UTC)
    waits = (parse_retry_after(headers, now) for headers in response_headers(error))
    return next((wait for wait in waits if wait is not None), None)


def refused_before_sending(error: BaseException) -> BaseException | None:
    """The exception in ``error``'s chain that says the call was refused before anything was sent.

    The OpenAI SDK's own ``OpenAIError`` (not one of its HTTP errors), raised for
    a missing key of OpenAI or Azure, a plain ``ValueError``, which LiteLLM
    raises for a missing Gemini key and other settings it cannot send, and an
    ``ImportError``: a package the provider needs is not installed (Vertex AI's
    ``google-auth``), which LiteLLM reports as an HTTP 500.
    """
    for current in exception_chain(error):
        kind = type(current)
        if kind is ValueError or isinstance(current, ImportError):
            return current
        if kind.__module__ == "openai" and kind.__name__ == "OpenAIError":
            return current
    return None


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


def _is_stream_break(error: BaseException) -> bool:
    """A connection that broke while the answer streamed (LiteLLM, httpx and aiohttp names)."""
    return type(error).__name__ in _STREAM_BREAK_NAMES


def _scrubbed(value: object, secrets: list[str]) -> object:
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, bytes):
        return scrub(value.decode("utf-8", "replace"), secrets).encode("utf-8")
    return value


def scrub_exception_chain(error: BaseException, secrets: Iterable[str]) -> None:
    """Scrub the messages of ``error`` and of every exception it chains, in place.

    A traceback of the translated error prints the chain (causes and contexts),
    so the chain's texts must be as clean as the error's own.
    """
    known = list(secrets)
    for current in exception_chain(error):
        current.args = tuple(_scrubbed(arg, known) for arg in current.args)
        message = getattr(current, "message", None)
        if isinstance(message, str | bytes):
            with contextlib.suppress(AttributeError):  # a read-only message stays
                current.message = _scrubbed(message, known)  # type: ignore[attr-defined]
