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
    gemini: bool
    """LiteLLM sends the model's calls to Gemini, on the Gemini API or Vertex AI (``is_gemini``)."""


def default_api(provider: str) -> str:
    """The Responses API for OpenAI models, streaming Chat Completions for every other provider."""
    return RESPONSES_API if provider == "openai" else CHAT_COMPLETIONS_API


def is_gemini(
    provider: str,
    provider_model: str,
    *,
    api_base: str | None = None,
    base_model: object = None,
) -> bool:
    """Whether LiteLLM sends the model's calls to Gemini, on the Gemini API or Vertex AI.

    As LiteLLM (1.105) routes them: every ``gemini`` and ``vertex_ai_beta``
    model; on ``vertex_ai``, a model named Gemini (``gemini-2.5-pro``, or
    ``gemini/<endpoint id>``), any model whose ``base_model`` option names
    Gemini (LiteLLM's way to call a tuned Gemini's numeric endpoint), and a
    numeric endpoint ID with an ``api_base`` (a Private Service Connect
    endpoint). A numeric ``vertex_ai`` endpoint without either is a Model Garden
    deployment, and Claude or another partner model on Vertex AI is no Gemini.
    """
    if provider in ("gemini", "vertex_ai_beta"):
        return True
    if provider != "vertex_ai":
        return False
    if isinstance(base_model, str) and "gemini" in base_model:
        return True
    return "gemini" in provider_model.lower() or (provider_model.isdigit() and api_base is not None)


def tool_result_images(provider: str, gemini: bool, api: str) -> ToolResultImages:
    """Where a tool result's images go for this provider and API ("Images on the built-in loop")."""
    if gemini:
        return ToolResultImages.OMITTED
    if api == RESPONSES_API or provider in TOOL_MESSAGE_IMAGE_PROVIDERS:
        return ToolResultImages.IN_RESULT
    return ToolResultImages.FOLLOW_UP_MESSAGE


def route_model(
    model: str,
    provider: str,
    provider_model: str,
    api: str | None,
    *,
    api_base: str | None = None,
    base_model: object = None,
) -> ModelRoute:
    """The route of ``model``, whose provider LiteLLM named; ``api`` overrides the default.

    ``api_base`` is the client's, and ``base_model`` the ``base_model`` of its
    request options: LiteLLM routes some Vertex AI models by them (``is_gemini``).
    Raises ``ValueError`` for an ``api`` other than ``None``, ``"responses"`` and
    ``"chat_completions"``.
    """
    if api is not None and api not in APIS:
        raise ValueError(f'api must be None, "responses" or "chat_completions", not {api!r}')
    chosen = default_api(provider) if api is None else api
    gemini = is_gemini(provider, provider_model, api_base=api_base, base_model=base_model)
    return ModelRoute(
        model=model,
        provider=provider,
        provider_model=provider_model,
        api=chosen,
        tool_result_images=tool_result_images(provider, gemini, chosen),
        gemini=gemini,
    )
