"""LiteLLM models for the built-in loop (``dex_agents.litellm``; install ``dex-agents[litellm]``).

``LiteLLMModelClient`` is a ``ModelClient`` on LiteLLM: the Responses API for
OpenAI models, streaming Chat Completions for every other provider.
``ESTIMATED_IMAGE_INPUT_TOKENS`` is what its estimate counts for each image it
sends; ``TOOL_RESULT_IMAGES_TEXT`` and ``TOOL_RESULT_IMAGES_OMITTED_TEXT`` are the
texts that show, or stand in for, a tool result's images. A provider error
raises ``ModelProviderError`` (``ModelStreamInterruptedError`` for a stream that
broke), whose ``retryable`` says whether a retry can help.

LiteLLM fetches its model price map from the internet when it is imported; set
``LITELLM_LOCAL_MODEL_COST_MAP=True`` on Workers that should not.
"""

from __future__ import annotations

try:
    import litellm  # noqa: F401  (only to name the extra when it is missing)
except ImportError as error:
    raise ImportError(
        'dex_agents.litellm needs LiteLLM: install it with pip install "dex-agents[litellm]"',
        name=__name__,
    ) from error

from dex_agents.adapters.litellm.client import ApiKeyProvider, LiteLLMModelClient
from dex_agents.adapters.litellm.errors import ModelProviderError, ModelStreamInterruptedError
from dex_agents.adapters.litellm.images import (
    ESTIMATED_IMAGE_INPUT_TOKENS,
    TOOL_RESULT_IMAGES_OMITTED_TEXT,
    TOOL_RESULT_IMAGES_TEXT,
)
from dex_agents.adapters.litellm.routing import CHAT_COMPLETIONS_API, RESPONSES_API

__all__ = [
    "CHAT_COMPLETIONS_API",
    "ESTIMATED_IMAGE_INPUT_TOKENS",
    "RESPONSES_API",
    "TOOL_RESULT_IMAGES_OMITTED_TEXT",
    "TOOL_RESULT_IMAGES_TEXT",
    "ApiKeyProvider",
    "LiteLLMModelClient",
    "ModelProviderError",
    "ModelStreamInterruptedError",
]
