"""The exceptions an error chains, read and scrubbed: what LiteLLM's own error leaves out.

LiteLLM wraps the HTTP client's error, and the provider's answer, in errors of
its own that drop or make up parts of it (a made-up HTTP 500 for a refused
connection, no headers); the chain (causes and contexts) keeps them. A
traceback prints the whole chain, so its texts are scrubbed as the error's own.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from dex_agents.adapters.litellm.redaction import scrub

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
