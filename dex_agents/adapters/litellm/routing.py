"""Which API a model uses, and how that API carries a tool result's images.

A route is decided once, when the client is built, from the provider LiteLLM
names for the model: the Responses API for OpenAI models, streaming Chat
Completions for every other provider, unless ``api=`` says otherwise.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal, TypeAlias

import attrs

RESPONSES_API: Final = "responses"
"""``api`` of the OpenAI Responses API, and of the output items it returns."""

CHAT_COMPLETIONS_API: Final = "chat_completions"
"""``api`` of streaming Chat Completions, and of the output items it returns."""

ModelApi: TypeAlias = Literal["responses", "chat_completions"]
"""``LiteLLMModelClient(api=...)``: ``"responses"`` or ``"chat_completions"``."""

APIS: Final = (RESPONSES_API, CHAT_COMPLETIONS_API)
"""The values ``LiteLLMModelClient(api=...)`` takes besides ``None``."""

GEMINI_PROVIDERS: Final = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})
"""Providers whose Gemini models see no tool result images."""

TOOL_MESSAGE_IMAGE_PROVIDERS: Final = frozenset({"anthropic", "bedrock"})
"""Chat Completions providers whose LiteLLM conversion keeps images in a tool message."""


class ToolResultImages(StrEnum):
    """Where a tool result's images go in the request."""

    IN_RESULT = "in_result"
    """In the tool message's (or ``function_call_output``'s) own parts."""
    FOLLOW_UP_MESSAGE = "follow_up_message"
    """In one user message per tool result, after the last tool message of the run."""
    OMITTED = "omitted"
    """Nowhere: the result's text says how many images the model does not see."""


@attrs.frozen(kw_only=True)
class ModelRoute:
    """How one model is called.

    ``model`` is the model as the application named it (``openai/gpt-5-mini``);
    ``provider`` and ``provider_model`` are LiteLLM's names for its provider and
    for the model at that provider (``openai``, ``gpt-5-mini``).
    """

    model: str
    provider: str
    provider_model: str
    api: str
    tool_result_images: ToolResultImages


def default_api(provider: str) -> str:
    """The Responses API for OpenAI models, streaming Chat Completions for every other provider."""
    return RESPONSES_API if provider == "openai" else CHAT_COMPLETIONS_API


def is_gemini(provider: str, provider_model: str) -> bool:
    """A Gemini model on the Gemini API or Vertex AI (not Claude or another model on Vertex AI)."""
    if provider == "gemini":
        return True
    return provider in GEMINI_PROVIDERS and "gemini" in provider_model.lower()


def tool_result_images(provider: str, provider_model: str, api: str) -> ToolResultImages:
    """Where a tool result's images go for this provider, model and API ("Images on the built-in loop")."""
    if is_gemini(provider, provider_model):
        return ToolResultImages.OMITTED
    if api == RESPONSES_API or provider in TOOL_MESSAGE_IMAGE_PROVIDERS:
        return ToolResultImages.IN_RESULT
    return ToolResultImages.FOLLOW_UP_MESSAGE


def route_model(model: str, provider: str, provider_model: str, api: str | None) -> ModelRoute:
    """The route of ``model``, whose provider LiteLLM named; ``api`` overrides the default.

    Raises ``ValueError`` for an ``api`` other than ``None``, ``"responses"`` and
    ``"chat_completions"``.
    """
    if api is not None and api not in APIS:
        raise ValueError(f'api must be None, "responses" or "chat_completions", not {api!r}')
    chosen = default_api(provider) if api is None else api
    return ModelRoute(
        model=model,
        provider=provider,
        provider_model=provider_model,
        api=chosen,
        tool_result_images=tool_result_images(provider, provider_model, chosen),
    )
