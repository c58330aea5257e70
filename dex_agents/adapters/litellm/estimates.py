"""``estimate_input_tokens`` of the LiteLLM client, without I/O.

It counts what the client would send: the instructions, user text, tool
results, each output item as it replays (the stored JSON to its own provider
and API, else its text and tool calls), and the tool definitions, with
``estimate_text_tokens``; and ``ESTIMATED_IMAGE_INPUT_TOKENS`` for each image it
sends, so not for a Gemini model's tool result images.
"""

from __future__ import annotations

from dex_agents.adapters.litellm.images import ESTIMATED_IMAGE_INPUT_TOKENS, with_omitted_images
from dex_agents.adapters.litellm.replay import replays_exactly
from dex_agents.adapters.litellm.routing import ModelRoute, ToolResultImages
from dex_agents.adapters.litellm.tools import schema_text
from dex_agents.domain.model_io import ModelOutputItem, ModelRequest, ToolResultItem, UserTextItem
from dex_agents.domain.token_estimates import estimate_text_tokens


def _tool_result_tokens(item: ToolResultItem, route: ModelRoute) -> int:
    if item.images and route.tool_result_images is ToolResultImages.OMITTED:
        return estimate_text_tokens(with_omitted_images(item.output, len(item.images)))
    return estimate_text_tokens(item.output) + ESTIMATED_IMAGE_INPUT_TOKENS * len(item.images)


def _output_tokens(item: ModelOutputItem, route: ModelRoute) -> int:
    if replays_exactly(item, route):
        return estimate_text_tokens(item.item)
    texts = [item.text or ""] + [call.tool_name + call.arguments for call in item.tool_calls]
    return sum(estimate_text_tokens(text) for text in texts)


def estimate_input_tokens(request: ModelRequest, route: ModelRoute) -> int:
    """The input tokens of ``request`` on ``route``, estimated."""
    total = estimate_text_tokens(request.instructions)
    for item in request.items:
        if isinstance(item, UserTextItem):
            total += estimate_text_tokens(item.text)
            total += ESTIMATED_IMAGE_INPUT_TOKENS * len(item.images)
        elif isinstance(item, ToolResultItem):
            total += _tool_result_tokens(item, route)
        else:
            total += _output_tokens(item, route)
    for tool in request.tools:
        texts = (tool.name, tool.description, schema_text(tool))
        total += sum(estimate_text_tokens(text) for text in texts)
    return total
