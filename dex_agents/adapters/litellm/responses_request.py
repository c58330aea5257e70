"""A ``ModelRequest`` as the arguments of one Responses API call (``litellm.aresponses``).

- The instructions are ``instructions``; the whole input is ``input``, every time,
  with ``store`` ``false`` and ``include`` ``["reasoning.encrypted_content"]``, so
  no conversation state stays at the provider.
- User text is a user message; with images its ``content`` is an ``input_text``
  part and one ``input_image`` part per image.
- An output item of this provider and API is its stored JSON; any other is an
  assistant message with its text and a ``function_call`` per tool call. Either
  way a call's arguments that are not a JSON object replay as ``{}``.
- A tool result is a ``function_call_output``; with images its ``output`` is the
  same parts, except for Gemini, whose output is the text and the omitted images text.
- Settings written for Chat Completions keep their effect: ``max_tokens`` is
  ``max_output_tokens`` and ``reasoning_effort`` joins a ``reasoning`` without an effort.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dex_agents.adapters.litellm.images import responses_parts, with_omitted_images
from dex_agents.adapters.litellm.options import responses_include
from dex_agents.adapters.litellm.replay import (
    provider_item,
    replayable_arguments,
    replays_exactly,
)
from dex_agents.adapters.litellm.routing import ModelRoute, ToolResultImages
from dex_agents.adapters.litellm.tools import responses_tools, tool_arguments
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelRequest,
    ToolResultItem,
    UserTextItem,
)


def _user_message(item: UserTextItem, image_bytes: Mapping[str, bytes]) -> dict[str, Any]:
    if not item.images:
        return {"role": "user", "content": item.text}
    return {"role": "user", "content": responses_parts(item.text, item.images, image_bytes)}


def _foreign_output(item: ModelOutputItem) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = []
    if item.text:
        converted.append({"role": "assistant", "content": item.text})
    converted.extend(
        {
            "type": "function_call",
            "call_id": call.tool_call_id,
            "name": call.tool_name,
            "arguments": replayable_arguments(call.arguments),
        }
        for call in item.tool_calls
    )
    return converted


def replayed_responses_item(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored Responses API output item as it replays.

    A ``function_call``'s arguments that are not a JSON object become ``{}``;
    all else stays as stored.
    """
    replayed = dict(data)
    if data.get("type") == "function_call" and "arguments" in data:
        replayed["arguments"] = replayable_arguments(data["arguments"])
    return replayed


def _tool_output(
    item: ToolResultItem, route: ModelRoute, image_bytes: Mapping[str, bytes]
) -> dict[str, Any]:
    output: str | list[dict[str, Any]] = item.output
    if item.images:
        if route.tool_result_images is ToolResultImages.OMITTED:
            output = with_omitted_images(item.output, len(item.images))
        else:
            output = responses_parts(item.output, item.images, image_bytes)
    return {"type": "function_call_output", "call_id": item.tool_call_id, "output": output}


def responses_input_item(
    item: ModelInputItem, route: ModelRoute, image_bytes: Mapping[str, bytes]
) -> list[dict[str, Any]]:
    """The Responses API input items of one model input item."""
    if isinstance(item, UserTextItem):
        return [_user_message(item, image_bytes)]
    if isinstance(item, ToolResultItem):
        return [_tool_output(item, route, image_bytes)]
    if replays_exactly(item, route):
        return [replayed_responses_item(provider_item(item))]
    return _foreign_output(item)


def responses_input(request: ModelRequest, route: ModelRoute) -> list[dict[str, Any]]:
    """The whole ``input`` of ``request``, in order."""
    return [
        converted
        for item in request.items
        for converted in responses_input_item(item, route, request.image_bytes)
    ]


_CHAT_OUTPUT_LIMITS = ("max_completion_tokens", "max_tokens")
"""Chat Completions names of the output limit, in the order a Responses call takes them."""


def responses_settings(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with the Chat Completions settings that LiteLLM's Responses call drops moved.

    ``litellm.aresponses`` silently drops ``max_tokens`` and
    ``max_completion_tokens``, and ignores ``reasoning_effort`` when ``reasoning``
    is given too, so settings written for Chat Completions would lose their
    output limit or effort on the Responses API, the default for OpenAI models.
    The limit becomes ``max_output_tokens`` and the effort ``reasoning.effort``,
    unless those are set.
    """
    moved = dict(options)
    for name in _CHAT_OUTPUT_LIMITS:
        limit = moved.pop(name, None)
        if limit is not None and moved.get("max_output_tokens") is None:
            moved["max_output_tokens"] = limit
    effort = moved.get("reasoning_effort")
    reasoning = moved.get("reasoning")
    if isinstance(effort, str) and isinstance(reasoning, Mapping) and "effort" not in reasoning:
        moved["reasoning"] = {**reasoning, "effort": effort}
        del moved["reasoning_effort"]
    return moved


def responses_arguments(
    request: ModelRequest, route: ModelRoute, options: Mapping[str, Any]
) -> dict[str, Any]:
    """The keyword arguments of ``litellm.aresponses``, without credentials and retries.

    ``options`` are the merged request options and model settings (``responses_settings``).
    """
    arguments: dict[str, Any] = {**responses_settings(options), "model": route.model}
    arguments["input"] = responses_input(request, route)
    if request.instructions:
        arguments["instructions"] = request.instructions
    arguments.update(tool_arguments(responses_tools(request.tools), request.tool_choice))
    if request.max_output_tokens is not None:
        arguments["max_output_tokens"] = request.max_output_tokens
    arguments["include"] = responses_include(options)
    arguments["store"] = False
    arguments["stream"] = True
    return arguments
