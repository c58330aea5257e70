"""upload_images: the images of one MCP result, stored at once, numbered in order."""

from __future__ import annotations

import asyncio
import base64
import hashlib

import pytest

from dex_agents.adapters.mcp.images import upload_images
from dex_agents.adapters.media.memory_store import InMemoryMediaStore
from dex_agents.domain.errors import ImageValidationError, MediaStoreError, ToolExecutionError
from dex_agents.domain.images import MAX_IMAGE_BYTES, AgentImageReference, build_image_reference
from tests.domain.images_support import png

STORE_URI = "memory://media"


class SlowStore:
    """Writes that yield to the loop, so overlapping writes show in ``most``.

    ``fails`` maps an image's bytes to the yields its write makes and the error it raises.
    """

    store_uri = STORE_URI

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.stored: list[str] = []
        self.fails: dict[bytes, tuple[int, Exception]] = {}

    async def put_image(self, data: bytes) -> AgentImageReference:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            yields, error = self.fails.get(data, (3, None))
            for _ in range(yields):
                await asyncio.sleep(0)
            if error is not None:
                raise error
            self.stored.append(hashlib.sha256(data).hexdigest())
            return build_image_reference(data, self.store_uri)
        finally:
            self.in_flight -= 1

    async def get_image(self, reference: AgentImageReference) -> bytes:
        raise MediaStoreError("not read in these tests")


def _content(images: list[bytes]) -> list[dict[str, str]]:
    blocks = [{"type": "text", "text": "three dots"}]
    blocks += [
        {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": "image/png"}
        for data in images
    ]
    return blocks


IMAGES = [png(total_size=len(png()) + 20 * n) for n in range(3)]


async def test_the_images_of_a_result_are_stored_at_once_and_numbered_in_order() -> None:
    store = SlowStore()
    references = await upload_images(store, _content(IMAGES))
    assert store.most == 3
    assert [r.sha256 for r in references] == [hashlib.sha256(d).hexdigest() for d in IMAGES]


async def test_the_first_failing_images_error_is_raised_after_every_write_ends() -> None:
    store = SlowStore()
    store.fails = {
        IMAGES[1]: (6, ImageValidationError("a broken chunk")),
        IMAGES[2]: (0, MediaStoreError("the bucket is gone")),
    }
    with pytest.raises(
        ToolExecutionError, match=r"^MCP image 2 is not a supported image: a broken chunk$"
    ):
        await upload_images(store, _content(IMAGES))
    assert store.in_flight == 0
    store.fails = {IMAGES[2]: (0, MediaStoreError("the bucket is gone"))}
    with pytest.raises(MediaStoreError, match=r"^the bucket is gone$"):
        await upload_images(store, _content(IMAGES))


async def test_an_image_over_max_image_bytes_fails_naming_its_size() -> None:
    # It passes the structural check; only the store's size limit refuses it.
    large = png(total_size=MAX_IMAGE_BYTES + 1)
    with pytest.raises(
        ToolExecutionError,
        match=rf"^MCP image 1 is not a supported image: image is {MAX_IMAGE_BYTES + 1} bytes, "
        rf"more than MAX_IMAGE_BYTES \({MAX_IMAGE_BYTES}\)$",
    ):
        await upload_images(InMemoryMediaStore(), _content([large]))
