"""Request options and model settings: what they may set, and how they merge.

``LiteLLMModelClient(request_options=...)`` are the client's own keyword
arguments for LiteLLM, and ``ModelRequest.settings`` (the agent's
``model_settings``) are passed to the provider as they are, over them. Neither
may set what the client sets itself, such as the input, the tools, streaming,
provider-side storage or retries, and neither may hold a credential: credentials
come from the Worker's environment, as LiteLLM reads them, or from
``api_key_provider``. ``include`` on the Responses API is merged with the
client's ``reasoning.encrypted_content``. Every call gets its own copy of their
nested dicts and lists, because LiteLLM writes into some of them (``metadata``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

RESERVED_KEYS: Final = frozenset(
    {
        "model",
        "messages",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "stream",
        "stream_options",
        "store",
        "previous_response_id",
        "conversation",
        "api_base",
        "base_url",
        "num_retries",
        "max_retries",
        # The route, and so the provider that output items carry, comes from the
        # model name; this key would send the call to another provider's API.
        "custom_llm_provider",
    }
)
"""Keys the client sets itself, refused in request options and model settings."""

CREDENTIAL_KEYS: Final = frozenset(
    {
        "api_key",
        "azure_ad_token",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "aws_bearer_token",
        "vertex_credentials",
        "client_secret",
    }
)
"""Keys that hold credentials, refused in request options and model settings."""

ENCRYPTED_REASONING_INCLUDE: Final = "reasoning.encrypted_content"
"""The Responses API ``include`` value the client always sends."""


def check_options(where: str, options: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` for a reserved or credential key of ``options``, named in ``where``.

    The message names the key only, never its value.
    """
    for key in options:
        if not isinstance(key, str):
            raise TypeError(f"{where} keys must be strings, not {type(key).__name__}")
        if key in CREDENTIAL_KEYS:
            raise ValueError(
                f"{where} may not hold the credential {key!r}: LiteLLMModelClient reads "
                "credentials from the environment, as LiteLLM does, or from api_key_provider"
            )
        if key in RESERVED_KEYS:
            raise ValueError(f"{where} may not set {key!r}: LiteLLMModelClient sets it")


def _own_copy(value: Any) -> Any:
    """``value`` with every mapping in it a new dict and every list a new list; else kept as is."""
    if isinstance(value, Mapping):
        return {key: _own_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_own_copy(item) for item in value]
    return value


def merged_options(
    request_options: Mapping[str, Any], settings: Mapping[str, Any]
) -> dict[str, Any]:
    """The request options with the model settings over them, both checked, as this call's copy.

    LiteLLM adds its own entries to a ``metadata`` dict it is given, one more
    on every call, so without a copy the agent's ``model_settings`` and the
    client's ``request_options`` would grow with each call and show them.
    """
    check_options("model settings", settings)
    return {key: _own_copy(value) for key, value in {**request_options, **settings}.items()}


def responses_include(options: Mapping[str, Any]) -> list[str]:
    """``reasoning.encrypted_content`` followed by any other ``include`` values of ``options``."""
    extra = options.get("include") or ()
    if isinstance(extra, str) or not all(isinstance(value, str) for value in extra):
        raise ValueError("include must be a list of strings")
    return [ENCRYPTED_REASONING_INCLUDE, *(v for v in extra if v != ENCRYPTED_REASONING_INCLUDE)]
