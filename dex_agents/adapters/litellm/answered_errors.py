"""Errors a provider answered inside a successful (200) response, and whether a retry helps.

A provider, or a gateway in front of it, may answer a streaming request with
HTTP 200 and a JSON error body in place of the stream (``{"error": {...}}``),
or end a stream with an error event: the OpenAI Responses API's ``error``
event, documented flat (``{"type": "error", "code": ..., "message": ...}``)
and sent nested too (``{"type": "error", "error": {...}}``), and Anthropic's
``error`` event. LiteLLM (1.105) reads the first as a stream that ended with
nothing and the flat event as a generic in-stream error, the provider's words
lost either way, so both read as retryable stream breaks. ``answered_error``
reads such a body or event; ``is_retryable_kind`` is the one rule of whether
a retry can help an error the provider named by its kind.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Final

import attrs

from dex_agents.adapters.litellm.errors import (
    ModelProviderError,
    ModelStreamInterruptedError,
    is_retryable_status,
)
from dex_agents.adapters.litellm.provider_messages import describe_failure
from dex_agents.adapters.litellm.redaction import scrub

RETRYABLE_ERROR_KINDS: Final = frozenset(
    {
        # OpenAI (``type`` or ``code``)
        "server_error",
        "rate_limit_exceeded",
        # Anthropic (``type``)
        "api_error",
        "overloaded_error",
        "rate_limit_error",
        "timeout_error",
        # Gemini (``status``)
        "RESOURCE_EXHAUSTED",
        "UNAVAILABLE",
        "INTERNAL",
        "DEADLINE_EXCEEDED",
        # Bedrock (``x-amzn-ErrorType``, ``__type``)
        "ThrottlingException",
        "InternalServerException",
        "ServiceUnavailableException",
        "ModelNotReadyException",
        "ModelTimeoutException",
    }
)
"""Kinds of error a later attempt of the same request may pass: rate limits, overload, server errors."""

_MESSAGE_LIMIT: Final = 2000


def is_retryable_kind(kinds: Collection[str], status: int | None = None) -> bool:
    """Whether a retry may help an error the provider named by ``kinds`` (its code, type, status).

    A numeric ``status`` the error names decides as an HTTP status would
    (``is_retryable_status``). An error of no named kind may be retried, as an
    error without an HTTP status is; one whose kinds are all others
    (``context_length_exceeded``, ``invalid_request_error``, ``insufficient_quota``)
    fails at once.
    """
    if status is not None:
        return is_retryable_status(status)
    if not kinds:
        return True
    return any(kind in RETRYABLE_ERROR_KINDS or kind.startswith("rate_limit") for kind in kinds)


@attrs.frozen(kw_only=True)
class AnsweredError:
    """An error the provider answered in a body or event: its message, kinds and numeric code."""

    message: str
    kinds: tuple[str, ...]
    """The error's ``code``, ``type`` and ``status`` that are names, in that order."""
    status: int | None
    """The error's ``code`` when it is an HTTP status (Gemini's), else ``None``."""
    in_stream: bool
    """The error ended a stream that had begun, rather than standing in for it."""

    @property
    def retryable(self) -> bool:
        """Whether a retry may help (``is_retryable_kind``)."""
        return is_retryable_kind(self.kinds, self.status)


def _names(values: Iterable[object]) -> tuple[str, ...]:
    return tuple(value for value in values if isinstance(value, str) and value)


def answered_error(data: object, *, in_stream: bool) -> AnsweredError | None:
    """The error a JSON body or event ``data`` holds, or ``None`` when it holds none."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        fields = error
        kinds = _names(fields.get(key) for key in ("code", "type", "status"))
    elif isinstance(error, str) and error:
        fields, kinds = {"message": error}, ()
    elif data.get("type") == "error":
        # The Responses API's documented error event: its type is the event's, not a kind.
        fields, kinds = data, _names([data.get("code")])
    else:
        return None
    code = fields.get("code")
    status = code if isinstance(code, int) and not isinstance(code, bool) else None
    status = status if status is not None and 400 <= status <= 599 else None
    message = fields.get("message")
    if not isinstance(message, str) or not message.strip():
        if not kinds and status is None:
            return None
        message = kinds[0] if kinds else f"error {status}"
    message = message.strip()
    if len(message) > _MESSAGE_LIMIT:
        message = message[:_MESSAGE_LIMIT] + "..."
    return AnsweredError(message=message, kinds=kinds, status=status, in_stream=in_stream)


def answered_failure(
    error: AnsweredError, *, provider: str, secrets: Iterable[str]
) -> ModelProviderError:
    """The error a call raises for ``error``: a break of the stream when a retry may help it.

    It has no HTTP status: the provider answered 200.
    """
    known = list(secrets)
    if error.in_stream and error.retryable:
        text = f"the {provider} stream broke before the answer ended: {error.message}"
        return ModelStreamInterruptedError(scrub(text, known), provider=provider)
    return ModelProviderError(
        scrub(describe_failure(provider, None, error.message), known),
        provider=provider,
        status_code=None,
        retryable=error.retryable,
    )


def raised_by_litellm(error: BaseException) -> bool:
    """Whether LiteLLM's own code raised ``error`` (its traceback's last frame is LiteLLM's).

    LiteLLM (1.105) may fail on its own while it files a provider's error: an
    error chunk whose ``code`` is a name (Groq's, OpenRouter's) raised a bare
    ``ValueError`` from ``int("context_length_exceeded")``.
    """
    traceback = error.__traceback__
    if traceback is None:
        return False
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    module = traceback.tb_frame.f_globals.get("__name__")
    return isinstance(module, str) and module.split(".", 1)[0] == "litellm"
