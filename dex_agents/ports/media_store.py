"""Media stores: where image bytes live, keyed by their SHA-256 ("Images")."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Protocol, TypeVar, runtime_checkable

from dex_agents.domain.errors import MediaStoreError
from dex_agents.domain.images import AgentImageReference

T = TypeVar("T")


@runtime_checkable
class MediaStore(Protocol):
    """Stores image bytes and reads them back by reference.

    Contract:

    - ``put_image`` is idempotent: one object per image, keyed by the SHA-256 of
      its bytes, so a retried tool Step, a client that sends again, or two Workers
      at once write one object, and storing bytes that already exist succeeds.
      It refuses bytes that are not a supported image with
      ``ImageValidationError`` and a failed write with ``MediaStoreError``.
    - The reference's ``uri`` ends in ``/sha256/<sha256>``, lies under
      ``store_uri``, and is at most ``MAX_IMAGE_URI_LENGTH`` bytes as UTF-8.
    - ``get_image`` returns exactly the bytes the reference was made from: it
      reads only references under its own ``store_uri``, reads at most one byte
      past ``size_bytes``, and checks the SHA-256, the size and the image type. A
      missing object or any mismatch raises ``MediaStoreError``.
    - Both methods are safe to call concurrently.
    """

    @property
    def store_uri(self) -> str:
        """The store's location, such as ``s3://bucket/prefix``; references start with it."""
        ...

    async def put_image(self, data: bytes) -> AgentImageReference:
        """Store the image and return its reference."""
        ...

    async def get_image(self, reference: AgentImageReference) -> bytes:
        """Read and verify the bytes of a reference this store made."""
        ...


LOAD_IMAGES_AT_ONCE = 8
"""How many reads ``load_images`` keeps in flight at once."""


async def load_images(
    store: MediaStore, references: Iterable[AgentImageReference]
) -> dict[str, bytes]:
    """The bytes of each image, keyed by ``sha256`` in the references' order, read with
    ``store.get_image``.

    A runner calls it when it builds model input, with the references of its
    replayed items or of ``collect_turn_images(turn)``. Each ``sha256`` is read
    once, with its first reference; a later reference of it that names another
    ``mime_type`` or size raises ``MediaStoreError`` before anything is read, since
    a model request builds each image from its own reference and those bytes
    cannot be both. Up to ``LOAD_IMAGES_AT_ONCE`` reads run at once, which the port allows: a model call's images cost about one read's latency
    rather than one per image, and a store can share a connection between them.
    Every read ends before the call returns or raises, and a failure raises the
    error (``MediaStoreError`` or ``ImageValidationError``) of the first reference
    whose read failed, as reading one at a time would.
    """
    firsts: dict[str, AgentImageReference] = {}
    for reference in references:
        first = firsts.setdefault(reference.sha256, reference)
        if (reference.mime_type, reference.size_bytes) != (first.mime_type, first.size_bytes):
            raise MediaStoreError(
                f"image {reference.uri!r} does not match its bytes: sha256 {reference.sha256} "
                f"is a {first.size_bytes}-byte {first.mime_type}, not a "
                f"{reference.size_bytes}-byte {reference.mime_type}"
            )
    slots = asyncio.Semaphore(LOAD_IMAGES_AT_ONCE)

    async def read(reference: AgentImageReference) -> bytes:
        async with slots:
            return await store.get_image(reference)

    contents = await all_in_order(read(r) for r in firsts.values())
    return dict(zip(firsts, contents, strict=True))


async def all_in_order(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Run ``calls`` at once and return their results in order.

    Every call ends before this returns or raises, and the error raised is the first
    call's in order that failed, as running them one at a time would raise it; the
    media store helpers (``load_images``, an MCP result's uploads) run on it.
    """
    # gather waits for every call; its cancellation cancels and awaits them all.
    results = await asyncio.gather(*calls, return_exceptions=True)
    done: list[T] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        done.append(result)
    return done
