"""What every media store does with the bytes it read for a reference, before it returns them."""

from __future__ import annotations

from dex_agents.domain.errors import ImageValidationError, MediaStoreError
from dex_agents.domain.images import AgentImageReference, verify_image_bytes


def checked_stored_image(data: bytes, reference: AgentImageReference, name: str) -> bytes:
    """``data`` when they are the bytes ``reference`` was made from (``verify_image_bytes``).

    Stored bytes that do not match are the store's failure, not the caller's:
    ``MediaStoreError`` saying that ``name`` (the image as the store shows it)
    does not match its reference, and why.
    """
    try:
        verify_image_bytes(data, reference)
    except ImageValidationError as error:
        raise MediaStoreError(f"{name} does not match its reference: {error}") from error
    return data
