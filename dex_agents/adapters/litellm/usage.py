"""Each API's usage as ``AgentUsage`` for one model call.

Input tokens include cached ones, as both APIs count them; a missing count is 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dex_agents.domain.usage import AgentUsage


def _count(data: Mapping[str, Any] | None, key: str) -> int:
    if not isinstance(data, Mapping):
        return 0
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _details(data: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    details = data.get(key) if isinstance(data, Mapping) else None
    return details if isinstance(details, Mapping) else None


def responses_usage(data: Mapping[str, Any] | None) -> AgentUsage:
    """Responses API ``usage``: ``input_tokens``, ``output_tokens`` and their details."""
    return AgentUsage(
        model_calls=1,
        input_tokens=_count(data, "input_tokens"),
        output_tokens=_count(data, "output_tokens"),
        cached_input_tokens=_count(_details(data, "input_tokens_details"), "cached_tokens"),
        reasoning_tokens=_count(_details(data, "output_tokens_details"), "reasoning_tokens"),
    )


def chat_completions_usage(data: Mapping[str, Any] | None) -> AgentUsage:
    """Chat Completions ``usage``: ``prompt_tokens``, ``completion_tokens`` and their details."""
    return AgentUsage(
        model_calls=1,
        input_tokens=_count(data, "prompt_tokens"),
        output_tokens=_count(data, "completion_tokens"),
        cached_input_tokens=_count(_details(data, "prompt_tokens_details"), "cached_tokens"),
        reasoning_tokens=_count(_details(data, "completion_tokens_details"), "reasoning_tokens"),
    )
