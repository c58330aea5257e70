"""Image content of a successful ``tools/call`` result, uploaded through a media store ("Images").

Each ``image`` block is decoded, checked and stored (the images of one result at
once); the text shows ``[image <n>]`` in its place. More than
``MAX_IMAGES_PER_MESSAGE`` images, base64 that is invalid or not canonical, or
bytes that are not a supported image fail the call with ``ToolExecutionError``,
so nothing half-uploaded is recorded as a success.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents.domain.errors import ImageValidationError, ToolExecutionError
from dex_agents.domain.image_detection import detect_image_mime_type
from dex_agents.domain.images import MAX_IMAGES_PER_MESSAGE, AgentImageReference
from dex_agents.ports.media_store import MediaStore, all_in_order


def _image_bytes(number: int, block: Mapping[str, Any]) -> bytes:
    data = block.get("data")
    if not isinstance(data, str):
        raise ToolExecutionError(f"MCP image {number} has no base64 data")
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ToolExecutionError(f"MCP image {number} is not valid base64") from error
    if base64.b64encode(decoded).decode("ascii") != data:
        raise ToolExecutionError(f"MCP image {number} is not canonical base64")
    if detect_image_mime_type(decoded) is None:
        raise ToolExecutionError(f"MCP image {number} is not a supported image")
    return decoded


def image_blocks(content: object) -> list[Mapping[str, Any]]:
    """The ``image`` blocks of a result's content, in order."""
    if not isinstance(content, Sequence) or isinstance(content, str):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == "image"]


async def upload_images(store: MediaStore, content: object) -> tuple[AgentImageReference, ...]:
    """Store every image of ``content`` and return the references, counting from 1."""
    blocks = image_blocks(content)
    if len(blocks) > MAX_IMAGES_PER_MESSAGE:
        raise ToolExecutionError(
            f"the MCP tool returned {len(blocks)} images, more than {MAX_IMAGES_PER_MESSAGE}"
        )
    decoded = [_image_bytes(number, block) for number, block in enumerate(blocks, start=1)]

    async def put(number: int, data: bytes) -> AgentImageReference:
        try:
            return await store.put_image(data)
        except ImageValidationError as error:
            # The structural check passed, so the store refused it for another reason,
            # such as a size over MAX_IMAGE_BYTES: the recorded error names it.
            raise ToolExecutionError(
                f"MCP image {number} is not a supported image: {error}"
            ) from error

    # Stored at once (at most MAX_IMAGES_PER_MESSAGE): a store may share one connection
    # among them (S3MediaStore).
    return tuple(await all_in_order(put(n, data) for n, data in enumerate(decoded, start=1)))
