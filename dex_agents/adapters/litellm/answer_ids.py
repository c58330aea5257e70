"""Which answers LiteLLM names with an ID of its own, which no provider's record holds.

``ModelCallMetadata.response_id`` (the chat span's ``gen_ai.response.id``) is
the ID the provider gave its answer. LiteLLM (1.105) names a Chat Completions
chunk ``chatcmpl-<uuid>`` of its own when it keeps no ID of the provider's:

- its Anthropic Messages reader drops the message ID (``msg_...``), on every
  route that LiteLLM sends to Anthropic's API: Anthropic itself, and Claude on
  Vertex AI (``streamRawPredict``) or Azure AI (``/anthropic/v1/messages``);
- Bedrock's Converse stream, and Claude's through ``invoke``, carry no ID.

Bedrock Runtime's OpenAI-compatible Chat Completions
(``/openai/v1/chat/completions``) names its answer, and LiteLLM keeps that ID.
LiteLLM sends a model's request there or to Converse request by request (GPT
5.6 and newer go there by default, but to Converse with tools and reasoning),
so for Bedrock the URL that answered decides, not the model.

Such an answer reports ``None``, as the runner contract says of a value the
framework does not expose.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from dex_agents.adapters.litellm.routing import ModelRoute

_ANTHROPIC_READER_PROVIDERS: Final = frozenset({"vertex_ai", "azure_ai"})
"""Providers whose Claude models LiteLLM reads with its Anthropic reader."""

_NAMING_BEDROCK_PATH: Final = "/chat/completions"
"""The end of the path of Bedrock's one API whose stream names the answer."""


def litellm_names_the_answer(route: ModelRoute, answer_url: str | None = None) -> bool:
    """Whether the ID LiteLLM gives this route's answer is LiteLLM's own, not the provider's.

    ``answer_url`` is the URL LiteLLM sent the request to (``streams.answer_url``).
    """
    if route.provider == "anthropic":
        return True
    if route.provider == "bedrock":
        path = urlsplit(answer_url).path if answer_url else ""
        return not path.rstrip("/").endswith(_NAMING_BEDROCK_PATH)
    return reads_as_anthropic(route)


def reads_as_anthropic(route: ModelRoute) -> bool:
    """Whether LiteLLM reads this route's Claude answers with its Anthropic reader (Vertex AI, Azure AI)."""
    return (
        route.provider in _ANTHROPIC_READER_PROVIDERS and "claude" in route.provider_model.lower()
    )
