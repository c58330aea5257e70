"""Which stored output items replay provider-exact ("Model clients").

An output item replays byte for byte, as the provider's JSON, to the provider and
API that made it, so encrypted reasoning and thinking signatures come back
unchanged. An item from another provider or API replays as its text and tool
calls, and its reasoning is dropped; each request module converts those.
"""

from __future__ import annotations

import json
from typing import Any

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
