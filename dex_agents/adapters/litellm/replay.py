"""Which stored output items replay provider-exact ("Model clients").

An output item replays byte for byte, as the provider's JSON, to the provider and
API that made it, so encrypted reasoning and thinking signatures come back
unchanged. An item from another provider or API replays as its text and tool
calls, and its reasoning is dropped; each request module converts those.

Either way, a tool call's arguments replay as a JSON object: arguments that are
not one (a call cut at the output token limit, a model's bad JSON) are stored as
they came, so the tool reports them, and replay as ``{}``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from dex_agents.adapters.litellm.routing import ModelRoute
from dex_agents.domain.model_io import ModelOutputItem


def replays_exactly(item: ModelOutputItem, route: ModelRoute) -> bool:
    """Whether ``item`` was made by ``route``'s provider and API."""
    return item.provider == route.provider and item.api == route.api


def provider_item(item: ModelOutputItem) -> dict[str, Any]:
    """The provider's JSON object that ``item`` holds; ``ValueError`` for anything else."""
    try:
        data = json.loads(item.item)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"a stored {item.provider} {item.api} output item is not JSON: {error}"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"a stored {item.provider} {item.api} output item is not a JSON object")
    return data


def item_json(data: Any) -> str:
    """The compact JSON text an output item stores, non-ASCII unescaped."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


REPLACED_ARGUMENTS: Final = "{}"
"""What a replayed tool call sends in place of arguments that are not a JSON object."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def replayable_arguments(arguments: object) -> str:
    """``arguments`` unchanged when they are a JSON object's text, else ``REPLACED_ARGUMENTS``.

    LiteLLM's Anthropic, Gemini and Bedrock conversions parse every replayed
    call's arguments and fail before sending when they cannot, which would fail
    every later request of the session. The model still reads what went wrong
    in the call's result.
    """
    if not isinstance(arguments, str):
        return REPLACED_ARGUMENTS
    try:
        value = json.loads(arguments, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return REPLACED_ARGUMENTS
    return arguments if isinstance(value, dict) else REPLACED_ARGUMENTS
