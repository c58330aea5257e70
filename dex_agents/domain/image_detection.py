"""Image detection: the cheap structural check that tells PNG, JPEG, GIF, and WebP bytes apart.

The check is exactly the spec's list ("Images"), so that every core accepts and
refuses the same bytes: the PNG signature and ``IHDR``; JPEG SOI, a marker, and EOI
at the end; the GIF header and screen descriptor; the WebP RIFF size and a ``VP8``,
``VP8L``, or ``VP8X`` chunk. It reads a few fixed offsets, never walks the rest of
the data, and decodes no pixels, so it costs the same for ``MAX_IMAGE_BYTES`` as for
a tiny image. It is not a full decode: bytes that pass may still fail to decode.
"""

from __future__ import annotations

from collections.abc import Callable

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The IHDR chunk header that must follow the signature: its length (13, big-endian) and type.
_PNG_IHDR_HEADER = b"\x00\x00\x00\x0dIHDR"

_JPEG_SOI = b"\xff\xd8"
_JPEG_EOI = b"\xff\xd9"
# SOI, a marker's two bytes, and EOI, none of them overlapping.
_JPEG_MIN_LENGTH = 6

_GIF_VERSIONS = (b"GIF87a", b"GIF89a")
# The 6-byte header and the 7-byte logical screen descriptor.
_GIF_MIN_LENGTH = 13

_WEBP_FIRST_CHUNKS = (b"VP8 ", b"VP8L", b"VP8X")
# "RIFF", the size, "WEBP", and the first chunk's fourcc.
_WEBP_MIN_LENGTH = 16


def _is_png(data: bytes) -> bool:
    return data[:8] == _PNG_SIGNATURE and data[8:16] == _PNG_IHDR_HEADER


def _is_jpeg(data: bytes) -> bool:
    return (
        len(data) >= _JPEG_MIN_LENGTH
        and data[:2] == _JPEG_SOI
        and data[2] == 0xFF
        and data[-2:] == _JPEG_EOI
    )


def _is_gif(data: bytes) -> bool:
    return len(data) >= _GIF_MIN_LENGTH and data[:6] in _GIF_VERSIONS


def _is_webp(data: bytes) -> bool:
    return (
        len(data) >= _WEBP_MIN_LENGTH
        and data[:4] == b"RIFF"
        and int.from_bytes(data[4:8], "little") == len(data) - 8
        and data[8:12] == b"WEBP"
        and data[12:16] in _WEBP_FIRST_CHUNKS
    )


_DETECTORS: tuple[tuple[str, Callable[[bytes], bool]], ...] = (
    ("image/png", _is_png),
    ("image/jpeg", _is_jpeg),
    ("image/gif", _is_gif),
    ("image/webp", _is_webp),
)


def detect_image_mime_type(data: bytes | bytearray | memoryview) -> str | None:
    """The MIME type of PNG, JPEG, GIF, or WebP bytes by the spec's structural check, or ``None``.

    - PNG (``image/png``): the 8-byte signature ``89 50 4E 47 0D 0A 1A 0A``, then an
      ``IHDR`` chunk header: length 13 (big-endian) and type ``IHDR`` at offsets 8-15.
    - JPEG (``image/jpeg``): SOI ``FF D8``, a marker's ``FF`` at offset 2, and EOI
      ``FF D9`` as the last two bytes, at least 6 bytes in all so the three do not overlap.
    - GIF (``image/gif``): ``GIF87a`` or ``GIF89a``, and the 7-byte logical screen
      descriptor present (at least 13 bytes).
    - WebP (``image/webp``): ``RIFF``, a little-endian size equal to the data length
      minus 8, ``WEBP``, and a first chunk whose fourcc is ``VP8 ``, ``VP8L``, or ``VP8X``.

    Nothing else is checked: not chunk CRCs, image data, dimensions, or what follows
    the header, so truncated or trailing bytes pass wherever these checks allow.
    """
    view = bytes(data)
    for mime_type, matches in _DETECTORS:
        if matches(view):
            return mime_type
    return None
