"""Credentials scrubbed from error texts and URLs, before anything shows or logs them.

Provider errors, as LiteLLM and the HTTP clients under it word them, can echo
the request's key or its ``Authorization`` header. ``scrub`` replaces every
known secret (the key the client sent, and credential-like environment values)
and every credential-shaped text it recognizes with ``[redacted]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit, urlunsplit

REDACTED: Final = "[redacted]"
"""What a scrubbed secret reads as."""

MIN_SECRET_LENGTH: Final = 8
"""Shorter known secrets are not scrubbed as text, since they would match ordinary words."""

_SECRET_ENVIRONMENT_NAME: Final = re.compile(
    r"(API_KEY|APIKEY|SECRET|TOKEN|PASSWORD|CREDENTIAL|ACCESS_KEY)", re.IGNORECASE
)

_PATTERNS: Final = (
    # An Authorization header value, wherever it appears.
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE), r"\1 " + REDACTED),
    # A header or field that names a key, as text, JSON or a Python repr.
    (
        re.compile(
            r"""((?:authorization|proxy-authorization|x-api-key|x-goog-api-key|api[-_]?key|"""
            r"""access[-_]?token|secret)["']?\s*[:=]\s*["']?)(?!\[redacted\]|Bearer |Basic )"""
            r"""[^\s"',;}&]+""",
            re.IGNORECASE,
        ),
        r"\1" + REDACTED,
    ),
    # Query parameters that carry keys, such as the Gemini API's ?key=.
    (
        re.compile(r"([?&](?:key|api_key|access_token|token|sig|signature)=)[^&\s\"']+"),
        r"\1" + REDACTED,
    ),
    # Key shapes: OpenAI and Anthropic (sk-...), Google (AIza...), AWS access key IDs.
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
)


def environment_secrets(environment: Mapping[str, str]) -> list[str]:
    """The values of credential-like variables (``*_API_KEY``, ``*_TOKEN``, ...)."""
    return [
        value
        for name, value in environment.items()
        if _SECRET_ENVIRONMENT_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH
    ]


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` and every credential-shaped text replaced."""
    for secret in sorted(
        {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True
    ):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_url(url: str) -> str:
    """``url`` without a password and with every query value redacted, for ``repr``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(
        f"{field.split('=', 1)[0]}={REDACTED}" if "=" in field else field
        for field in parts.query.split("&")
        if field
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
