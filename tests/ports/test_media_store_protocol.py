"""The media store port: a small in-memory store fits it.

``store: MediaStore = InMemoryStore()`` is also mypy's check that the fake fits.
"""

from __future__ import annotations

import hashlib

from dex_agents.domain.images import AgentImageReference
from dex_agents.ports.media_store import MediaStore
from tests.ports.tool_source_fakes import FakeToolSource


class InMemoryStore:
    store_uri = "memory://tests"

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    async def put_image(self, data: bytes) -> AgentImageReference:
        digest = hashlib.sha256(data).hexdigest()
        self.objects.setdefault(digest, data)
        return AgentImageReference(
            uri=f"{self.store_uri}/sha256/{digest}",
            mime_type="image/png",
            sha256=digest,
            size_bytes=len(data),
        )

    async def get_image(self, reference: AgentImageReference) -> bytes:
        return self.objects[reference.sha256]


async def test_a_media_store_fits_its_port() -> None:
    store: MediaStore = InMemoryStore()
    reference = await store.put_image(b"\x89PNG")
    assert reference.uri.startswith(store.store_uri)
    assert await store.get_image(reference) == b"\x89PNG"
    assert isinstance(store, MediaStore)
    assert not isinstance(FakeToolSource(), MediaStore)
