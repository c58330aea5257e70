"""Which answers LiteLLM names with an ID of its own, which no provider's record holds.

``ModelCallMetadata.response_id`` (the chat span's ``gen_ai.response.id``) is
the ID the provider gave its answer. LiteLLM (1.105) names a Chat Completions
chunk ``chatcmpl-<uuid>`` of its own when it keeps no ID of the provider's:

- its Anthropic Messages reader drops the message ID (``msg_...``), on every
  route that LiteLLM sends to Anthropic's API: Anthropic itself, and Claude on
  Vertex AI (``streamRawPredict``) or Azure AI (``/anthropic/v1/messages``);
- Bedrock's stream (Converse, and Claude through ``invoke``) carries no ID.

Such an answer reports ``None``, as the runner contract says of a value the
framework does not expose.
"""

from __future__ import annotations

from typing import Final

from dex_agents.adapters.litellm.routing import ModelRoute

_NO_ID_PROVIDERS: Final = frozenset({"anthropic", "bedrock"})
"""Providers whose every answer LiteLLM names itself."""

_ANTHROPIC_READER_PROVIDERS: Final = frozenset({"vertex_ai", "vertex_ai_beta", "azure_ai"})
"""Providers whose Claude models LiteLLM reads with its Anthropic reader."""


def litellm_names_the_answer(route: ModelRoute) -> bool:
    """Whether the ID LiteLLM gives this route's answer is LiteLLM's own, not the provider's."""
    if route.provider in _NO_ID_PROVIDERS:
        return True
    return (
        route.provider in _ANTHROPIC_READER_PROVIDERS and "claude" in route.provider_model.lower()
    )
