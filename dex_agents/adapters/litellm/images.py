"""Images in LiteLLM requests: base64 ``data:`` URLs in each API's parts ("Images on the built-in loop").

Each image follows the item's text. A text part is left out when the text is
empty, because some providers refuse an empty text part.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Final

from dex_agents.domain.images import AgentImageReference

ESTIMATED_IMAGE_INPUT_TOKENS: Final = 1600
"""The input tokens ``estimate_input_tokens`` counts for each image the client sends."""

TOOL_RESULT_IMAGES_TEXT: Final = "The {tool_name} tool call {tool_call_id} returned these images."
"""The text of the user message that shows a tool result's images to a provider whose
tool messages carry only text; ``str.format`` it with ``tool_name`` and ``tool_call_id``."""

TOOL_RESULT_IMAGES_OMITTED_TEXT: Final = (
    "[The tool returned {image_count} {image_noun}; "
    "this model does not receive images from tool results.]"
)
"""What a Gemini model reads after a tool result's text instead of its images;
``str.format`` it with ``image_count`` and ``image_noun`` (``image`` or ``images``)."""

IMAGE_DETAIL: Final = "auto"
"""The ``detail`` of every Responses API ``input_image`` part."""


def data_url(image: AgentImageReference, image_bytes: Mapping[str, bytes]) -> str:
    """``data:<mime_type>;base64,<bytes>``; raises ``LookupError`` when the bytes are missing."""
    data = image_bytes.get(image.sha256)
    if data is None:
        raise LookupError(f"image bytes missing from the model request: {image.sha256}")
    return f"data:{image.mime_type};base64,{base64.b64encode(data).decode('ascii')}"


def responses_parts(
    text: str, images: Sequence[AgentImageReference], image_bytes: Mapping[str, bytes]
) -> list[dict[str, Any]]:
    """An ``input_text`` part and one ``input_image`` part per image."""
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": text}] if text else []
    parts.extend(
        {"type": "input_image", "image_url": data_url(image, image_bytes), "detail": IMAGE_DETAIL}
        for image in images
    )
    return parts


def chat_parts(
    text: str, images: Sequence[AgentImageReference], image_bytes: Mapping[str, bytes]
) -> list[dict[str, Any]]:
    """A ``text`` part and one ``image_url`` part per image."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts.extend(
        {"type": "image_url", "image_url": {"url": data_url(image, image_bytes)}}
        for image in images
    )
    return parts


def follow_up_text(tool_name: str, tool_call_id: str) -> str:
    """``TOOL_RESULT_IMAGES_TEXT`` for one tool call."""
    return TOOL_RESULT_IMAGES_TEXT.format(tool_name=tool_name, tool_call_id=tool_call_id)


def omitted_images_text(image_count: int) -> str:
    """``TOOL_RESULT_IMAGES_OMITTED_TEXT`` for ``image_count`` images."""
    noun = "image" if image_count == 1 else "images"
    return TOOL_RESULT_IMAGES_OMITTED_TEXT.format(image_count=image_count, image_noun=noun)


def with_omitted_images(output: str, image_count: int) -> str:
    """A tool result's text, then a blank line and the omitted images text."""
    note = omitted_images_text(image_count)
    return f"{output}\n\n{note}" if output else note
