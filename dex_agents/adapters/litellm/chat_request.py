"""A ``ModelRequest`` as the arguments of one streaming Chat Completions call (``litellm.acompletion``).

- The instructions are the system message; the whole conversation follows, every time.
- User text is a user message; with images its ``content`` is a ``text`` part and
  one ``image_url`` part per image.
- An output item of this provider and API is its stored assistant message, with
  Anthropic ``thinking_blocks`` and their ``signature``; a run of other items is
  one assistant message with their text and tool calls. Either way a tool call's
  arguments that are not a JSON object replay as ``{}``, and an answer with no
  text and no tool calls is left out.
- A tool result is a tool message. Its images go where the route says: in the
  message's parts (Anthropic, Bedrock), in one user message per result after the
  run's last tool message (``TOOL_RESULT_IMAGES_TEXT`` and the image parts), or
  nowhere, with ``TOOL_RESULT_IMAGES_OMITTED_TEXT`` after the text (Gemini).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents.adapters.litellm.images import chat_parts, follow_up_text, with_omitted_images
from dex_agents.adapters.litellm.replay import (
    provider_item,
    replayable_arguments,
    replays_exactly,
)
from dex_agents.adapters.litellm.routing import ModelRoute, ToolResultImages
from dex_agents.adapters.litellm.tools import chat_tools, tool_arguments
from dex_agents.domain.model_io import (
    ModelOutputItem,
    ModelRequest,
    ToolResultItem,
    UserTextItem,
)


def _user_message(item: UserTextItem, image_bytes: Mapping[str, bytes]) -> dict[str, Any]:
    if not item.images:
        return {"role": "user", "content": item.text}
    return {"role": "user", "content": chat_parts(item.text, item.images, image_bytes)}


def _replayed_call(call: Any) -> Any:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return call
    arguments = replayable_arguments(function.get("arguments"))
    if arguments == function.get("arguments"):
        return call
    return {**call, "function": {**function, "arguments": arguments}}


def _is_blank(content: object) -> bool:
    return not content or (isinstance(content, str) and not content.strip())


def replayed_chat_message(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """An assistant message, stored or converted, as every Chat Completions route reads it.

    ``None`` for an answer with no text and no tool calls, such as one cut at
    the output token limit while reasoning, or a refusal. Its tool calls'
    arguments that are not a JSON object become ``{}``. All else stays as
    stored, so thinking signatures replay unchanged.
    """
    calls = message.get("tool_calls")
    if not calls and _is_blank(message.get("content")):
        # OpenAI and Azure refuse an assistant message with neither content nor
        # tool calls; "" instead would reach Anthropic as LiteLLM's placeholder
        # text and Gemini as an empty text part. LiteLLM already leaves such a
        # message out for Anthropic, Gemini and Bedrock, so every route now agrees.
        return None
    replayed = dict(message)
    if isinstance(calls, list) and calls:
        replayed["tool_calls"] = [_replayed_call(call) for call in calls]
    return replayed


def _foreign_message(items: Sequence[ModelOutputItem]) -> dict[str, Any]:
    text = "".join(item.text or "" for item in items)
    calls = [call for item in items for call in item.tool_calls]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.tool_call_id,
                "type": "function",
                "function": {"name": call.tool_name, "arguments": call.arguments},
            }
            for call in calls
        ]
    return message


def _output_messages(items: Sequence[ModelOutputItem], route: ModelRoute) -> list[dict[str, Any]]:
    """A run of output items: exact ones as stored, each run of others as one message."""
    stored: list[dict[str, Any]] = []
    foreign: list[ModelOutputItem] = []
    for item in items:
        if replays_exactly(item, route):
            if foreign:
                stored.append(_foreign_message(foreign))
                foreign = []
            stored.append(provider_item(item))
        else:
            foreign.append(item)
    if foreign:
        stored.append(_foreign_message(foreign))
    replayed = (replayed_chat_message(message) for message in stored)
    return [message for message in replayed if message is not None]


def _tool_messages(
    results: Sequence[ToolResultItem], route: ModelRoute, image_bytes: Mapping[str, bytes]
) -> list[dict[str, Any]]:
    """A run of tool results: one tool message each, then any follow-up image messages."""
    messages: list[dict[str, Any]] = []
    follow_ups: list[dict[str, Any]] = []
    mode = route.tool_result_images
    for result in results:
        content: str | list[dict[str, Any]] = result.output
        if result.images and mode is ToolResultImages.IN_RESULT:
            content = chat_parts(result.output, result.images, image_bytes)
        elif result.images and mode is ToolResultImages.OMITTED:
            content = with_omitted_images(result.output, len(result.images))
        elif result.images:
            follow_ups.append(
                {
                    "role": "user",
                    "content": chat_parts(
                        follow_up_text(result.tool_name, result.tool_call_id),
                        result.images,
                        image_bytes,
                    ),
                }
            )
        messages.append({"role": "tool", "tool_call_id": result.tool_call_id, "content": content})
    return messages + follow_ups


def chat_messages(request: ModelRequest, route: ModelRoute) -> list[dict[str, Any]]:
    """The system message and the whole conversation of ``request``, in order."""
    messages: list[dict[str, Any]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    outputs: list[ModelOutputItem] = []
    results: list[ToolResultItem] = []

    def flush() -> None:
        if outputs:
            messages.extend(_output_messages(outputs, route))
            outputs.clear()
        if results:
            messages.extend(_tool_messages(results, route, request.image_bytes))
            results.clear()

    for item in request.items:
        if isinstance(item, ModelOutputItem):
            if results:
                flush()
            outputs.append(item)
        elif isinstance(item, ToolResultItem):
            if outputs:
                flush()
            results.append(item)
        else:
            flush()
            messages.append(_user_message(item, request.image_bytes))
    flush()
    return messages


def chat_arguments(
    request: ModelRequest, route: ModelRoute, options: Mapping[str, Any]
) -> dict[str, Any]:
    """The keyword arguments of ``litellm.acompletion``, without credentials and retries.

    ``options`` are the merged request options and model settings. The call
    streams, with usage in the last chunk.
    """
    arguments: dict[str, Any] = {**options, "model": route.model}
    arguments["messages"] = chat_messages(request, route)
    arguments.update(tool_arguments(chat_tools(request.tools), request.tool_choice))
    if request.max_output_tokens is not None:
        arguments["max_tokens"] = request.max_output_tokens
    arguments["stream"] = True
    arguments["stream_options"] = {"include_usage": True}
    return arguments
