"""The built-in loop's stored items: the ``framework_item`` JSON of its messages.

Every message the built-in loop stores is one item, in one of three JSON forms:

- ``{"type": "user_text", "text": ..., "images": [...]}``: user text, provider-neutral;
- ``{"type": "model_output", "item": ..., "provider": ..., "api": ..., "text": ...,
  "reasoning": ..., "tool_calls": [{"tool_call_id", "tool_name", "arguments"}]}``:
  one model output item, provider-exact (``item`` is the provider's JSON text);
- ``{"type": "tool_result", "tool_call_id": ..., "tool_name": ..., "output": ...,
  "images": [...]}``: a tool call's result, provider-neutral.

``model_input_item`` turns a stored item back into the ``ModelRequest`` item.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from dex_agents.domain.canonical_json import compact_encoder
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.wire import from_wire, to_wire

USER_TEXT_ITEM = "user_text"
"""The ``type`` of a stored user text item."""

MODEL_OUTPUT_ITEM = "model_output"
"""The ``type`` of a stored model output item."""

TOOL_RESULT_ITEM = "tool_result"
"""The ``type`` of a stored tool result item."""

MODEL_INPUT_ITEM_CACHE_SIZE = 4096
"""How many stored items' parsed forms a process keeps (least recently used go first)."""

# json.dumps(data, ensure_ascii=False, separators=(",", ":")), as items were always stored.
_compact = compact_encoder(sort_keys=False, ensure_ascii=False, allow_nan=True)


def _dumps(data: dict[str, Any], images: Sequence[AgentImageReference] = ()) -> str:
    # Images come after the item's other fields, and an item without images has no
    # ``images`` key, so its bytes are those of an item stored before images existed.
    if images:
        data = {**data, "images": _images_wire(images)}
    return _compact(data)


def _images_wire(images: Sequence[AgentImageReference]) -> list[Any]:
    return [to_wire(image) for image in images]


def _images(data: dict[str, Any]) -> tuple[AgentImageReference, ...]:
    return tuple(from_wire(image, AgentImageReference) for image in data.get("images") or ())


def user_text_message(text: str, images: Sequence[AgentImageReference] = ()) -> FrameworkMessage:
    """A ``user`` message holding a ``user_text`` item."""
    item = {"type": USER_TEXT_ITEM, "text": text}
    return FrameworkMessage(
        role=MessageRole.USER,
        framework_item=_dumps(item, images),
        text=text,
        images=tuple(images),
    )


def model_output_message(output: ModelOutputItem) -> FrameworkMessage:
    """An ``assistant`` message holding one ``model_output`` item.

    The ``tool_*`` projection names the item's tool call when it has exactly one.
    """
    item = {
        "type": MODEL_OUTPUT_ITEM,
        "item": output.item,
        "provider": output.provider,
        "api": output.api,
        "text": output.text,
        "reasoning": output.reasoning,
        "tool_calls": [
            {
                "tool_call_id": call.tool_call_id,
                "tool_name": call.tool_name,
                "arguments": call.arguments,
            }
            for call in output.tool_calls
        ],
    }
    single = output.tool_calls[0] if len(output.tool_calls) == 1 else None
    return FrameworkMessage(
        role=MessageRole.ASSISTANT,
        framework_item=_dumps(item),
        text=output.text,
        tool_call_id=None if single is None else single.tool_call_id,
        tool_name=None if single is None else single.tool_name,
        tool_arguments=None if single is None else single.arguments,
    )


def tool_result_message(result: ToolResultItem) -> FrameworkMessage:
    """A ``tool`` message holding a ``tool_result`` item."""
    item = {
        "type": TOOL_RESULT_ITEM,
        "tool_call_id": result.tool_call_id,
        "tool_name": result.tool_name,
        "output": result.output,
    }
    return FrameworkMessage(
        role=MessageRole.TOOL,
        framework_item=_dumps(item, result.images),
        tool_call_id=result.tool_call_id,
        tool_name=result.tool_name,
        tool_output=result.output,
        images=result.images,
    )


@functools.lru_cache(maxsize=MODEL_INPUT_ITEM_CACHE_SIZE)
def model_input_item(framework_item: str) -> ModelInputItem:
    """The ``ModelRequest`` item of a stored ``framework_item``.

    Raises ``ValueError`` naming the problem for text that is not one of the
    built-in loop's item forms, such as a message another runner stored.
    Every model call rebuilds its input from every stored message, so the
    frozen items are kept by their exact text (``MODEL_INPUT_ITEM_CACHE_SIZE``):
    a stored message is parsed once per process, not once per model call.
    """
    try:
        data = json.loads(framework_item)
    except json.JSONDecodeError as error:
        raise ValueError(f"stored framework_item is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError("stored framework_item is not a JSON object")
    kind = data.get("type")
    try:
        if kind == USER_TEXT_ITEM:
            return UserTextItem(text=data["text"], images=_images(data))
        if kind == MODEL_OUTPUT_ITEM:
            return ModelOutputItem(
                item=data["item"],
                provider=data["provider"],
                api=data["api"],
                text=data.get("text"),
                reasoning=data.get("reasoning"),
                tool_calls=tuple(
                    ModelToolCall(
                        tool_call_id=call["tool_call_id"],
                        tool_name=call["tool_name"],
                        arguments=call["arguments"],
                    )
                    for call in data.get("tool_calls") or ()
                ),
            )
        if kind == TOOL_RESULT_ITEM:
            return ToolResultItem(
                tool_call_id=data["tool_call_id"],
                tool_name=data["tool_name"],
                output=data["output"],
                images=_images(data),
            )
    except (KeyError, TypeError) as error:
        raise ValueError(f"stored {kind} item is malformed: missing or bad {error}") from None
    raise ValueError(f"stored framework_item has unknown type {kind!r}")
