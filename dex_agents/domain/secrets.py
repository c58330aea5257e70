"""Values that must never reach a ``repr``, a log line or an error text.

Settings maps (``AgentDefinition.model_settings``, ``ModelRequest.settings``,
session settings) may carry a provider's credentials. A key names a credential
when it contains one of ``CREDENTIAL_KEY_PARTS`` (case-insensitive, so
``api_key``, ``OPENAI_API_KEY``, ``aws_secret_access_key``, ``Authorization``
all do); ``redact_secrets`` replaces those values, at any depth, with
``REDACTED``, and leaves every other value as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

CREDENTIAL_KEY_PARTS: Final = (
    "api_key",
    "apikey",
    "token",
    "secret",
    "password",
    "authorization",
    "credential",
    "access_key",
    "private_key",
    "session_key",
    "cookie",
)
"""Parts of a key that make its value a credential."""

REDACTED: Final = "<redacted>"
"""What a credential's value is shown as."""


def names_a_credential(key: object) -> bool:
    """Whether a settings key names a credential."""
    if not isinstance(key, str):
        return False
    lowered = key.lower().replace("-", "_")
    return any(part in lowered for part in CREDENTIAL_KEY_PARTS)


def redact_secrets(value: Any) -> Any:
    """``value`` with every credential's value replaced by ``REDACTED``, at any depth."""
    if isinstance(value, Mapping):
        return {
            key: REDACTED if names_a_credential(key) else redact_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_secrets(item) for item in value)
    return value
