"""Tool call IDs the session can record, for providers whose IDs it cannot.

The session refuses a turn's tool call ID that is blank, holds ``/`` or a lone
surrogate, or repeats another of the turn, and a refused answer fails the turn
after every ``RunModel`` retry, each a paid model call. Providers that number their calls per answer
(Hugging Face TGI names every call ``"0"``) or that LiteLLM bridges into the
Responses API with such IDs would do that, so their calls get a new ID, which the
stored message keeps: the call and its result replay matched.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from typing import TypeGuard

from dex_agents.domain.model_io import ModelInputItem, ModelOutputItem, ToolResultItem
from dex_agents.domain.turns import InvalidToolCallIdError, validate_tool_call_id


def conversation_tool_call_ids(items: Iterable[ModelInputItem]) -> frozenset[str]:
    """The tool call IDs that ``items`` already hold: their calls' and results'."""
    ids: set[str] = set()
    for item in items:
        if isinstance(item, ToolResultItem):
            ids.add(item.tool_call_id)
        elif isinstance(item, ModelOutputItem):
            ids.update(call.tool_call_id for call in item.tool_calls)
    return frozenset(ids)


def recordable_call_id(call_id: object, used: set[str], taken_ids: Collection[str]) -> str:
    """``call_id``, or ``call_<random hex>`` when the session would refuse it
    (``validate_tool_call_id``: no ``str``, blank, holding ``/`` or a lone surrogate) or it
    is one of ``used`` (the answer's earlier calls) or ``taken_ids`` (the conversation's).

    The ID returned is added to ``used``.
    """
    kept = (
        call_id
        if _valid(call_id) and call_id not in used and call_id not in taken_ids
        else f"call_{uuid.uuid4().hex}"
    )
    used.add(kept)
    return kept


def _valid(call_id: object) -> TypeGuard[str]:
    # The session's own rule, so an ID kept here is one the turn can record.
    if not isinstance(call_id, str):
        return False
    try:
        validate_tool_call_id(call_id)
    except InvalidToolCallIdError:
        return False
    return True
