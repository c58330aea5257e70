"""``dex-agents chat --model MODEL``: the demo agent on a real model through LiteLLM.

The model comes from ``--model`` or ``DEX_AGENTS_MODEL``; without either the chat
stays on the scripted demo model, so ``./demo.sh`` needs no key. The provider's
key comes from the environment as LiteLLM reads it (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, ...). ``--api-base`` (or ``DEX_AGENTS_API_BASE``) points
at an OpenAI-compatible or other local server: an ``openai/`` model is asked
through the Responses API, so a server that speaks only Chat Completions
(llama.cpp's) takes ``hosted_vllm/MODEL``. A missing extra, an unknown
model or a missing key is one clear line before the chat starts.
"""

from __future__ import annotations

import os
import warnings

from dex_agents.cli.errors import CliError
from dex_agents.ports.model_client import ModelClient

MODEL_ENV = "DEX_AGENTS_MODEL"
"""The environment variable that names the chat's model when ``--model`` is not given."""

API_BASE_ENV = "DEX_AGENTS_API_BASE"
"""The environment variable that names the model server when ``--api-base`` is not given."""


def real_model_client(model: str, api_base: str | None) -> ModelClient:
    """A ``LiteLLMModelClient`` for ``model``, checked before any session starts."""
    # LiteLLM otherwise fetches its price map from the internet on import (seconds offline).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm

        from dex_agents.litellm import LiteLLMModelClient
    except ImportError as error:
        # --inexact: a plain `uv sync --extra X` uninstalls every other extra, so this
        # hint and the other extra's would each undo the other (serve with --model).
        raise CliError(
            f"--model needs the litellm extra: uv sync --inexact --extra litellm ({error})"
        ) from error
    litellm.suppress_debug_info = True
    # LiteLLM's own pydantic models warn as it builds a Responses API answer (its usage
    # with a cost added): three lines of pydantic's text in the middle of the chat.
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)
    try:
        _, provider, _, _ = litellm.get_llm_provider(model)
    except Exception as error:  # LiteLLM raises its own BadRequestError subclasses here
        raise CliError(
            f"unknown model {model!r}: name it as provider/model, e.g. openai/gpt-5-mini"
        ) from error
    if api_base is None:
        check = litellm.validate_environment(model=model)
        missing = [key for key in check.get("missing_keys", []) if key]
        if missing:
            raise CliError(
                f"model {model!r} ({provider}) needs {', '.join(missing)} in the environment"
            )
    return LiteLLMModelClient(model, api_base=api_base)
