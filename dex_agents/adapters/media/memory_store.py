"""InMemoryMediaStore: image bytes kept in one process, for tests ("Images", "Stores")."""

from __future__ import annotations

from dex_agents.adapters.media.stored_bytes import checked_stored_image
from dex_agents.domain.errors import MediaStoreError
from dex_agents.domain.images import (
    AgentImageReference,
    build_image_reference,
    require_short_image_uris,
    require_store_image_reference,
)

__all__ = ["InMemoryMediaStore"]


class InMemoryMediaStore:
    """A ``MediaStore`` that keeps images in memory, for tests in one process.

    Images are keyed by their SHA-256, so storing the same bytes again returns the
    same reference and keeps one copy. Nothing survives the process.
    """

    def __init__(self, store_uri: str = "memory://media") -> None:
        require_short_image_uris(store_uri)
        self._store_uri = store_uri
        self._images: dict[str, bytes] = {}

    @property
    def store_uri(self) -> str:
        """The store's location; every reference's ``uri`` starts with it."""
        return self._store_uri

    def __repr__(self) -> str:
        return f"InMemoryMediaStore(store_uri={self._store_uri!r})"

    async def put_image(self, data: bytes) -> AgentImageReference:
        """Store the image and return its reference; ``ImageValidationError`` for other bytes."""
        reference = build_image_reference(data, self._store_uri)
        # No await between the check and the write, so concurrent puts keep one copy.
        self._images.setdefault(reference.sha256, bytes(data))
        return reference

    async def get_image(self, reference: AgentImageReference) -> bytes:
        """The verified bytes of a reference this store made.

        Raise ``ImageValidationError`` for an invalid reference, and ``MediaStoreError``
        for one of another store, an image that is not stored, or bytes that do not
        match the reference.
        """
        require_store_image_reference(reference, self._store_uri)
        try:
            data = self._images[reference.sha256]
        except KeyError:
            raise MediaStoreError(f"image {reference.uri!r} is not in this media store") from None
        return checked_stored_image(data, reference, f"image {reference.uri!r}")
