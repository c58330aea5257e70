"""Images: the references session state holds, and the pure rules every media store follows.

The bytes of an image live in a media store, keyed by their SHA-256; session state
holds only an ``AgentImageReference``. This module fixes the limits
(``MAX_IMAGE_BYTES``, ``MAX_IMAGES_PER_MESSAGE``, ``MAX_IMAGE_URI_LENGTH``), the checks
a reference must pass, how a store builds, names, and reads references, and which
images a turn references (``collect_turn_images``); it re-exports
``detect_image_mime_type`` from ``dex_agents.domain.image_detection``. A store does
the I/O; it asks these functions what is valid.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Protocol

import attrs

from dex_agents.domain.errors import ImageValidationError, MediaStoreError
from dex_agents.domain.image_detection import detect_image_mime_type

__all__ = [
    "MAX_IMAGES_PER_MESSAGE",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_URI_LENGTH",
    "SUPPORTED_IMAGE_MIME_TYPES",
    "AgentImageReference",
    "ImageCarrier",
    "ImageToolCall",
    "ImageTurn",
    "build_image_reference",
    "collect_turn_images",
    "detect_image_mime_type",
    "encode_file_uri_path",
    "image_bytes",
    "image_uri",
    "local_directory_root",
    "local_directory_store_uri",
    "require_short_image_uris",
    "require_store_image_reference",
    "validate_image_reference",
    "validate_image_references",
    "verify_image_bytes",
]


@attrs.frozen(kw_only=True)
class AgentImageReference:
    """One image in a media store, keyed by the SHA-256 of its bytes.

    Its wire form is ``{"type": "image", "uri": ..., "mime_type": ..., "sha256": ...,
    "size_bytes": ...}``. Session state never holds image bytes, only references.
    """

    uri: str
    mime_type: str
    sha256: str
    size_bytes: int


MAX_IMAGE_BYTES: Final = 3_750_000
"""The largest image, in bytes: its base64 text is 5,000,000 bytes."""

MAX_IMAGES_PER_MESSAGE: Final = 20
"""The most images one user message or tool result carries."""

MAX_IMAGE_URI_LENGTH: Final = 1024
"""The longest image ``uri``, in bytes as UTF-8."""

SUPPORTED_IMAGE_MIME_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The MIME types of the images a media store accepts."""

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_URI_SHA256_SEGMENT = "/sha256/"


def _shown(text: str) -> str:
    """A value for an error message, shortened so that a huge value keeps it readable."""
    return repr(text) if len(text) <= 100 else f"{text[:60]!r}... ({len(text)} characters)"


def _utf8_length(uri: str) -> int:
    try:
        return len(uri.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ImageValidationError(f"image uri is not valid Unicode text: {error}") from None


def validate_image_reference(reference: AgentImageReference) -> None:
    """Raise ``ImageValidationError`` naming the first check ``reference`` fails.

    A reference is an ``AgentImageReference`` with a supported ``mime_type``, a
    ``sha256`` of 64 lowercase hex digits, a ``size_bytes`` from 1 to
    ``MAX_IMAGE_BYTES``, and a non-empty ``uri`` of at most ``MAX_IMAGE_URI_LENGTH``
    bytes as UTF-8 that ends in ``/sha256/<sha256>``.
    """
    candidate: object = reference
    if not isinstance(candidate, AgentImageReference):
        raise ImageValidationError(
            f"an image must be an AgentImageReference, not {type(candidate).__name__}"
        )
    uri: object = candidate.uri
    mime_type: object = candidate.mime_type
    sha256: object = candidate.sha256
    size: object = candidate.size_bytes
    if not isinstance(mime_type, str) or mime_type not in SUPPORTED_IMAGE_MIME_TYPES:
        raise ImageValidationError(
            f"image mime_type {mime_type!r} is not supported; use one of "
            + ", ".join(SUPPORTED_IMAGE_MIME_TYPES)
        )
    if not isinstance(sha256, str) or not _SHA256_HEX.fullmatch(sha256):
        shown = _shown(sha256) if isinstance(sha256, str) else repr(sha256)
        raise ImageValidationError(f"image sha256 {shown} is not 64 lowercase hex digits")
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_IMAGE_BYTES:
        raise ImageValidationError(
            f"image size_bytes {size!r} is not from 1 to MAX_IMAGE_BYTES ({MAX_IMAGE_BYTES})"
        )
    if not isinstance(uri, str) or not uri:
        raise ImageValidationError(f"image uri {uri!r} is not a non-empty string")
    length = _utf8_length(uri)
    if length > MAX_IMAGE_URI_LENGTH:
        raise ImageValidationError(
            f"image uri is {length} bytes as UTF-8, more than "
            f"MAX_IMAGE_URI_LENGTH ({MAX_IMAGE_URI_LENGTH})"
        )
    if not uri.endswith(_URI_SHA256_SEGMENT + sha256):
        raise ImageValidationError(f"image uri {uri!r} does not end in /sha256/{sha256}")


def validate_image_references(
    references: Iterable[AgentImageReference],
) -> tuple[AgentImageReference, ...]:
    """Check the images of one message or tool result and return them as a tuple.

    Raise ``ImageValidationError`` for a value that is no sequence of references (a
    ``str``, ``bytes`` or mapping among them), for more than ``MAX_IMAGES_PER_MESSAGE``
    references, or for the first that ``validate_image_reference`` refuses, numbered from 1.
    """
    refused = ImageValidationError(
        f"images must be a sequence of AgentImageReference, not {type(references).__name__}"
    )
    # A text, bytes or mapping iterates too, into characters, ints or keys: refused as
    # image 1 (or as more than 20 images), which named the wrong mistake.
    if isinstance(references, str | bytes | bytearray | memoryview | Mapping):
        raise refused
    try:
        images = tuple(references)
    except TypeError:
        raise refused from None
    if len(images) > MAX_IMAGES_PER_MESSAGE:
        raise ImageValidationError(
            f"{len(images)} images; one message or tool result carries at most "
            f"MAX_IMAGES_PER_MESSAGE ({MAX_IMAGES_PER_MESSAGE})"
        )
    for number, reference in enumerate(images, start=1):
        try:
            validate_image_reference(reference)
        except ImageValidationError as error:
            raise ImageValidationError(f"image {number}: {error}") from None
    return images


def image_uri(store_uri: str, sha256: str) -> str:
    """The ``uri`` of the image ``sha256`` in the store at ``store_uri``.

    ``<store_uri>/sha256/<sha256>``, with one trailing ``/`` of ``store_uri`` dropped, so
    ``s3://bucket/`` and ``s3://bucket`` name the same objects and ``file:///`` gives
    ``file:///sha256/<sha256>``.
    """
    return f"{store_uri.removesuffix('/')}{_URI_SHA256_SEGMENT}{sha256}"


def require_short_image_uris(store_uri: str) -> None:
    """Raise ``ValueError`` for a store location that would make too long image URIs.

    The longest ``uri`` a store makes is ``image_uri(store_uri, <64 hex digits>)``; it
    must be at most ``MAX_IMAGE_URI_LENGTH`` bytes as UTF-8, so a ``store_uri`` (without
    a trailing ``/``) is at most 952 bytes. A store calls this when it is built.
    """
    if not store_uri:
        raise ValueError("a media store's URI is empty")
    try:
        longest = len(image_uri(store_uri, "0" * 64).encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ValueError(f"media store URI is not valid Unicode text: {error}") from None
    if longest > MAX_IMAGE_URI_LENGTH:
        raise ValueError(
            f"media store URI {_shown(store_uri)} makes image URIs of {longest} bytes as "
            f"UTF-8, more than MAX_IMAGE_URI_LENGTH ({MAX_IMAGE_URI_LENGTH}); use a shorter "
            "bucket, prefix, or root"
        )


def image_bytes(data: object) -> bytes:
    """``data`` as ``bytes``; ``TypeError`` unless it is ``bytes``, ``bytearray``, or ``memoryview``.

    ``bytes()`` alone would turn an ``int`` into that many zero bytes (gigabytes for a
    large one) and refuse a ``str`` with a message that names no image.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(
            f"image data must be bytes, bytearray, or memoryview, not {type(data).__name__}"
        )
    return bytes(data)


def build_image_reference(
    data: bytes | bytearray | memoryview, store_uri: str
) -> AgentImageReference:
    """The reference of ``data`` stored at ``image_uri(store_uri, sha256)``.

    Raise ``ImageValidationError`` for empty bytes, more than ``MAX_IMAGE_BYTES``, bytes
    that are not a supported, well-formed image, or a ``uri`` longer than
    ``MAX_IMAGE_URI_LENGTH``; ``ValueError`` for an empty ``store_uri``; ``TypeError``
    for ``data`` that is not bytes (see ``image_bytes``).
    """
    if not store_uri:
        raise ValueError("a media store's URI is empty")
    content = image_bytes(data)
    if not content:
        raise ImageValidationError("image bytes are empty")
    if len(content) > MAX_IMAGE_BYTES:
        raise ImageValidationError(
            f"image is {len(content)} bytes, more than MAX_IMAGE_BYTES ({MAX_IMAGE_BYTES})"
        )
    mime_type = detect_image_mime_type(content)
    if mime_type is None:
        raise ImageValidationError(
            "bytes are not a supported, well-formed image (PNG, JPEG, GIF, or WebP)"
        )
    sha256 = hashlib.sha256(content).hexdigest()
    reference = AgentImageReference(
        uri=image_uri(store_uri, sha256),
        mime_type=mime_type,
        sha256=sha256,
        size_bytes=len(content),
    )
    validate_image_reference(reference)
    return reference


def verify_image_bytes(
    data: bytes | bytearray | memoryview, reference: AgentImageReference
) -> None:
    """Check that ``data`` are the bytes ``reference`` was made from.

    Raise ``ImageValidationError`` naming the first mismatch: a size other than
    ``size_bytes``, a SHA-256 other than ``sha256``, or bytes that are not a well-formed
    image of ``mime_type``. A store runs this on every read.
    """
    content = bytes(data)
    if reference.mime_type not in SUPPORTED_IMAGE_MIME_TYPES:
        raise ImageValidationError(f"image mime_type {reference.mime_type!r} is not supported")
    if len(content) != reference.size_bytes:
        raise ImageValidationError(
            f"image bytes are {len(content)} bytes, but the reference's size_bytes "
            f"is {reference.size_bytes}"
        )
    actual = hashlib.sha256(content).hexdigest()
    if actual != reference.sha256:
        raise ImageValidationError(
            f"image bytes have SHA-256 {actual}, but the reference's sha256 is {reference.sha256}"
        )
    detected = detect_image_mime_type(content)
    if detected != reference.mime_type:
        found = "not a well-formed image" if detected is None else f"{detected}"
        raise ImageValidationError(
            f"image bytes are {found}, but the reference's mime_type is {reference.mime_type}"
        )


def require_images_of_store(
    images: Sequence[AgentImageReference], store_uri: str, *, source: str
) -> None:
    """Raise ``ImageValidationError`` for the first image not in the store at ``store_uri``.

    A runner reads every stored image again from its own store for each later
    model call, so a reference of another store would fail every later turn of
    the session. ``source`` says where the images came from, such as ``"tool
    search returned"``.
    """
    for number, image in enumerate(images, start=1):
        expected = image_uri(store_uri, image.sha256)
        if image.uri != expected:
            raise ImageValidationError(
                f"image {number}: {source} image uri {image.uri!r}, which "
                f"is not in the runner's media store; its images are {expected!r}"
            )


def require_store_image_reference(reference: AgentImageReference, store_uri: str) -> None:
    """Refuse a reference that is invalid or not an image of the store at ``store_uri``.

    A store reads only references under its own location, whose ``uri`` is
    ``image_uri(store_uri, reference.sha256)``. Raise ``ImageValidationError`` for a
    reference that ``validate_image_reference`` refuses, and ``MediaStoreError`` for a
    valid one of another store.
    """
    validate_image_reference(reference)
    expected = image_uri(store_uri, reference.sha256)
    if reference.uri != expected:
        raise MediaStoreError(
            f"image uri {reference.uri!r} is not in this media store; its images are {expected!r}"
        )


_FILE_URI_SAFE_BYTES = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/"
)


def encode_file_uri_path(path: str) -> str:
    """Percent-encode every byte of ``path`` other than ASCII letters, digits, ``-._~``, and ``/``.

    The bytes are the path's UTF-8, with ``surrogateescape``, so a POSIX name that is
    not UTF-8 keeps its bytes; hex digits are uppercase. Unicode is not normalized.
    """
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as error:
        raise ValueError(f"path {_shown(path)} is not encodable as UTF-8: {error}") from None
    return "".join(chr(byte) if byte in _FILE_URI_SAFE_BYTES else f"%{byte:02X}" for byte in raw)


def local_directory_root(root: str) -> str:
    """The absolute root of a ``LocalDirectoryMediaStore``, made absolute as text.

    ``root`` must be an absolute path. Like ``os.path.abspath``, this collapses ``//``,
    ``.``, and ``..`` and drops a trailing ``/`` as text only: it resolves no symbolic
    link and does not normalize Unicode. Unlike it, any number of leading slashes
    becomes one, so ``//srv`` is ``/srv`` in every core (POSIX leaves the meaning of
    exactly two to the system; Linux and macOS treat them as one). Raise ``ValueError``
    for a relative root or one that holds a NUL character.
    """
    if "\x00" in root:
        raise ValueError(f"root {_shown(root)} holds a NUL character")
    if not root.startswith("/"):
        raise ValueError(f"root must be an absolute path, not {_shown(root)}")
    # normpath keeps exactly two leading slashes; one leading slash leaves it nothing to keep.
    return posixpath.normpath("/" + root.lstrip("/"))


def local_directory_store_uri(root: str) -> str:
    """The store URI of a ``LocalDirectoryMediaStore``: ``file://`` and the encoded root.

    An image's ``uri`` is then ``file://<encoded root>/sha256/<sha256>``, the same in every
    core; see ``local_directory_root`` and ``encode_file_uri_path``.
    """
    return "file://" + encode_file_uri_path(local_directory_root(root))


class ImageCarrier(Protocol):
    """Anything that holds image references: ``AgentMessage`` does."""

    @property
    def images(self) -> Sequence[AgentImageReference]:
        """The references it carries, in order."""
        ...


class ImageToolCall(ImageCarrier, Protocol):
    """A tool call record with images, in the model's order: ``AgentToolCall`` is one."""

    @property
    def deferral_order(self) -> int:
        """The call's place in the model's order."""
        ...


class ImageTurn(Protocol):
    """What ``collect_turn_images`` reads of a turn; ``AgentTurnContext`` satisfies it."""

    @property
    def messages(self) -> Sequence[ImageCarrier]:
        """The stored messages, in sequence order."""
        ...

    @property
    def tool_calls(self) -> Mapping[str, ImageToolCall]:
        """The turn's tool call records by tool call ID."""
        ...


def collect_turn_images(turn: ImageTurn) -> tuple[AgentImageReference, ...]:
    """Every image reference of the turn's stored messages and tool call records, once each.

    Messages come first, in sequence order, then the tool call records in the
    model's order (``deferral_order``); each image appears once, at its first
    reference, as images are deduplicated by ``sha256``. A runner that builds its
    model input from stored state passes the result to ``load_images``.
    """
    records = sorted(turn.tool_calls.values(), key=lambda record: record.deferral_order)
    collected: dict[str, AgentImageReference] = {}
    for carrier in (*turn.messages, *records):
        for reference in carrier.images:
            collected.setdefault(reference.sha256, reference)
    return tuple(collected.values())
