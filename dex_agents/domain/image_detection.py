"""Image detection: the cheap structural check that tells PNG, JPEG, GIF, and WebP bytes apart.

It reads headers and walks chunk, segment, and block boundaries, which costs little
even for ``MAX_IMAGE_BYTES``; it decodes no pixels. It is conservative: an image that
is truncated, has bytes after its end, or breaks its format's structure is refused,
so a store never accepts bytes that a model provider would reject as an image.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

# PNG: the color types and the bit depths each allows (PNG specification, IHDR).
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_BIT_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_PNG_MAX_INT = 2**31 - 1
_PNG_PALETTE = 3


def _is_png(data: bytes) -> bool:
    if not data.startswith(_PNG_SIGNATURE) or len(data) < 33:
        return False
    length, kind = struct.unpack_from(">I4s", data, 8)
    (crc,) = struct.unpack_from(">I", data, 29)
    if length != 13 or kind != b"IHDR" or zlib.crc32(data[12:29]) != crc:
        return False
    width, height, depth, color, compression, filtering, interlace = struct.unpack_from(
        ">IIBBBBB", data, 16
    )
    if not (1 <= width <= _PNG_MAX_INT and 1 <= height <= _PNG_MAX_INT):
        return False
    if depth not in _PNG_BIT_DEPTHS.get(color, ()) or compression or filtering or interlace > 1:
        return False
    return _png_chunks_are_whole(data, needs_palette=color == _PNG_PALETTE)


def _png_chunks_are_whole(data: bytes, *, needs_palette: bool) -> bool:
    # Walking the chunk headers to an IEND that ends the data refuses truncated images.
    offset, seen_palette, seen_data = 33, False, False
    while offset + 12 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, offset)
        end = offset + 12 + length
        if length > _PNG_MAX_INT or end > len(data) or not kind.isalpha() or kind == b"IHDR":
            return False
        if kind == b"IEND":
            return length == 0 and seen_data and end == len(data)
        if kind == b"IDAT" and needs_palette and not seen_palette:
            return False
        seen_palette = seen_palette or kind == b"PLTE"
        seen_data = seen_data or kind == b"IDAT"
        offset = end
    return False


# JPEG: frame headers (SOF0-SOF15 but DHT, JPG, and DAC), and the bytes after 0xFF that
# cannot start a header segment: stuffing, TEM, RST0-RST7, SOI, and EOI.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE = frozenset({0x00, 0x01, *range(0xD0, 0xDA), 0xFF})
_JPEG_SOS = 0xDA


def _is_jpeg(data: bytes) -> bool:
    if len(data) < 6 or not data.startswith(b"\xff\xd8") or not data.endswith(b"\xff\xd9"):
        return False
    end, offset, seen_frame = len(data) - 2, 2, False
    while offset < end and data[offset] == 0xFF:
        while offset < end and data[offset] == 0xFF:
            offset += 1  # a marker may follow any number of 0xFF fill bytes
        if offset + 3 > end or data[offset] in _JPEG_STANDALONE:
            return False
        marker = data[offset]
        (length,) = struct.unpack_from(">H", data, offset + 1)
        segment_end = offset + 1 + length
        if segment_end > end:
            return False  # a length below 2 ends on a length byte, never 0xFF: refused next
        if marker == _JPEG_SOS:
            return seen_frame
        if marker in _JPEG_FRAMES:
            if seen_frame or not _jpeg_frame_is_whole(data[offset + 3 : segment_end]):
                return False
            seen_frame = True
        offset = segment_end
    return False


def _jpeg_frame_is_whole(frame: bytes) -> bool:
    if len(frame) < 6:
        return False
    _precision, height, width, components = struct.unpack_from(">BHHB", frame)
    return bool(height >= 1 and width >= 1 and components >= 1 and len(frame) == 6 + 3 * components)


def _is_gif(data: bytes) -> bool:
    if len(data) < 14 or data[:6] not in (b"GIF87a", b"GIF89a"):
        return False
    width, height, packed = struct.unpack_from("<HHB", data, 6)
    if not width or not height:
        return False
    offset, seen_image = 13 + _gif_color_table_size(packed), False
    while 0 <= offset < len(data):
        introducer = data[offset]
        if introducer == 0x3B:
            return seen_image and offset + 1 == len(data)
        if introducer == 0x21:
            offset = _gif_skip_sub_blocks(data, offset + 2)
        elif introducer == 0x2C and offset + 10 < len(data):
            _left, _top, frame_width, frame_height, frame_packed = struct.unpack_from(
                "<HHHHB", data, offset + 1
            )
            offset += 10 + _gif_color_table_size(frame_packed)
            if (
                not frame_width
                or not frame_height
                or offset >= len(data)
                or not 2 <= data[offset] <= 8
            ):
                return False  # data[offset] is the LZW minimum code size
            offset = _gif_skip_sub_blocks(data, offset + 1)
            seen_image = True
        else:
            return False
    return False


def _gif_color_table_size(packed: int) -> int:
    return 3 << ((packed & 0x07) + 1) if packed & 0x80 else 0


def _gif_skip_sub_blocks(data: bytes, offset: int) -> int:
    """The offset past the block terminator, or -1 when the data ends first."""
    while offset < len(data):
        size = data[offset]
        offset += 1 + size
        if size == 0:
            return offset
    return -1


_WEBP_IMAGE_CHUNKS = (b"VP8 ", b"VP8L", b"ANMF")


def _is_webp(data: bytes) -> bool:
    if len(data) < 20 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return False
    (riff_size,) = struct.unpack_from("<I", data, 4)
    chunks = _riff_chunks(data) if riff_size == len(data) - 8 else None
    if not chunks:
        return False
    kinds = [kind for kind, _start, _size in chunks]
    if kinds[0] not in _WEBP_HEADER_CHECKS or b"VP8X" in kinds[1:]:
        return False
    if kinds[0] == b"VP8X" and not any(kind in _WEBP_IMAGE_CHUNKS for kind in kinds[1:]):
        return False  # an extended file needs a still image or an animation frame
    return all(
        _WEBP_HEADER_CHECKS[kind](data, start, size)
        for kind, start, size in chunks
        if kind in _WEBP_HEADER_CHECKS
    )


def _riff_chunks(data: bytes) -> list[tuple[bytes, int, int]] | None:
    """Each chunk's fourcc, payload offset, and size; ``None`` if they do not fill the data."""
    chunks, offset = [], 12
    while offset < len(data):
        if offset + 8 > len(data):
            return None
        kind, size = struct.unpack_from("<4sI", data, offset)
        chunks.append((kind, offset + 8, size))
        offset += 8 + size + (size & 1)  # an odd payload is followed by a pad byte
    return chunks if offset == len(data) else None


def _vp8_is_whole(data: bytes, start: int, size: int) -> bool:
    if size < 10:
        return False
    tag = int.from_bytes(data[start : start + 3], "little")
    width, height = (value & 0x3FFF for value in struct.unpack_from("<HH", data, start + 6))
    key_frame, version, shown = not tag & 1, (tag >> 1) & 7, (tag >> 4) & 1
    return (
        key_frame
        and version <= 3
        and bool(shown)
        and tag >> 5 < size
        and data[start + 3 : start + 6] == b"\x9d\x01\x2a"
        and width >= 1
        and height >= 1
    )


def _vp8l_is_whole(data: bytes, start: int, size: int) -> bool:
    return size >= 5 and data[start] == 0x2F and data[start + 4] >> 5 == 0


def _vp8x_is_whole(data: bytes, start: int, size: int) -> bool:
    if size != 10:
        return False
    width = int.from_bytes(data[start + 4 : start + 7], "little") + 1
    height = int.from_bytes(data[start + 7 : start + 10], "little") + 1
    return width * height < 2**32


_WEBP_HEADER_CHECKS: dict[bytes, Callable[[bytes, int, int], bool]] = {
    b"VP8 ": _vp8_is_whole,
    b"VP8L": _vp8l_is_whole,
    b"VP8X": _vp8x_is_whole,
}

_DETECTORS: tuple[tuple[str, Callable[[bytes], bool]], ...] = (
    ("image/png", _is_png),
    ("image/jpeg", _is_jpeg),
    ("image/gif", _is_gif),
    ("image/webp", _is_webp),
)


def detect_image_mime_type(data: bytes | bytearray | memoryview) -> str | None:
    """The MIME type of well-formed PNG, JPEG, GIF, or WebP bytes, or ``None``.

    A cheap structural check, not a full decode: the PNG signature, a valid ``IHDR``,
    and whole chunks up to an ``IEND`` that ends the data; JPEG SOI, marker segments
    with a frame header up to the first scan, and EOI at the end; the GIF header
    (``GIF87a``/``GIF89a``), its logical screen descriptor, and whole blocks with an
    image up to the trailer that ends the data; a WebP RIFF size equal to the data
    length minus 8 and whole chunks that start with a valid ``VP8``, ``VP8L``, or
    ``VP8X`` chunk. Truncated images and bytes after the image's end are refused.
    """
    view = bytes(data)
    for mime_type, is_valid in _DETECTORS:
        if is_valid(view):
            return mime_type
    return None
