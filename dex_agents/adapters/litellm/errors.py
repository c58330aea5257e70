"""Errors of the LiteLLM client.

::

    DexAgentsError
    └── ModelCallError (dex_agents.ports.errors)
        └── ModelProviderError         a provider refused or failed one model call
            └── ModelStreamInterruptedError  the answer's stream ended before the answer did

    ValueError
    └── EventStreamFormatError  an AWS event stream message that does not hold (never raised by a call)

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
refused the request itself (``bedrock_stream_errors``). LiteLLM's errors are
translated to these in ``error_translation``; ``error_chains`` reads and
scrubs the exceptions an error chains. ``EventStreamFormatError`` stays inside
the client: the body watch stops reading a Bedrock stream it cannot decode,
which LiteLLM then fails on itself (``aws_event_stream``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from dex_agents.ports.errors import ModelCallError

RETRYABLE_STATUS_CODES: Final = frozenset({408, 409, 425, 429})
"""The 4xx statuses that a later attempt of the same request may pass."""


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


class EventStreamFormatError(ValueError):
    """An AWS event stream message whose lengths, CRCs or headers do not hold."""
