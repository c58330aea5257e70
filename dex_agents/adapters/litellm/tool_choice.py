"""Which models refuse a forced tool choice ("Plans and plan mode").

Claude Opus 5.5 and Claude Sonnet 5.5 refuse ``tool_choice`` ``"required"`` on
every route, and so does a Claude model with extended thinking on a route that
LiteLLM sends to Anthropic's API: Anthropic itself, Bedrock, Vertex AI or Azure
AI (``azure_ai/claude-...``, posted to ``/anthropic/v1/messages``). Such a
call counts as extended thinking when its settings hold a ``thinking`` option that
is not disabled, or a ``reasoning_effort`` other than ``"none"``. Gemini and OpenAI
models accept a forced tool choice with thinking or reasoning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from dex_agents.adapters.litellm.routing import ModelRoute

_REFUSING_MODELS: Final = re.compile(r"claude-(?:opus|sonnet)-5[-.]5(?![0-9])", re.IGNORECASE)
_CLAUDE_ROUTE_PROVIDERS: Final = frozenset({"bedrock", "vertex_ai", "azure_ai"})


def routes_to_claude_api(route: ModelRoute) -> bool:
    """Whether LiteLLM sends this model to Anthropic's Messages API, directly or on a cloud."""
    if route.provider == "anthropic":
        return True
    return route.provider in _CLAUDE_ROUTE_PROVIDERS and "claude" in route.provider_model.lower()


def asks_for_extended_thinking(settings: Mapping[str, Any]) -> bool:
    """A ``thinking`` option that is not disabled, or a ``reasoning_effort`` other than ``"none"``."""
    thinking = settings.get("thinking")
    if thinking is not None and thinking is not False:
        kind = thinking.get("type") if isinstance(thinking, Mapping) else thinking
        if kind != "disabled":
            return True
    effort = settings.get("reasoning_effort")
    return effort is not None and effort != "none"


def accepts_forced_tool_choice(route: ModelRoute, settings: Mapping[str, Any]) -> bool:
    """Whether a call of ``route`` with these settings accepts ``tool_choice`` ``"required"``."""
    if _REFUSING_MODELS.search(route.provider_model) or _REFUSING_MODELS.search(route.model):
        return False
    return not (routes_to_claude_api(route) and asks_for_extended_thinking(settings))
