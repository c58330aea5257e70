"""Tiny hand-built images for the image tests: valid ones and the parts to break them.

Each builder returns a complete, decodable 1x1 image unless its arguments break it,
so a test names exactly the one thing it changes.
"""

from __future__ import annotations

import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_chunk(kind: bytes, payload: bytes, *, crc: int | None = None) -> bytes:
    """One PNG chunk: length, type, payload, and the CRC of type and payload."""
    checksum = zlib.crc32(kind + payload) if crc is None else crc
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", checksum)


def png_ihdr(
    *,
    width: int = 1,
    height: int = 1,
    bit_depth: int = 8,
    color_type: int = 0,
    compression: int = 0,
    filter_method: int = 0,
    interlace: int = 0,
) -> bytes:
    """The 13 bytes of an IHDR payload."""
    return struct.pack(
        ">IIBBBBB", width, height, bit_depth, color_type, compression, filter_method, interlace
    )


def png(
    *,
    ihdr: bytes | None = None,
    middle: tuple[bytes, ...] | None = None,
    total_size: int | None = None,
) -> bytes:
    """A 1x1 grayscale PNG; ``middle`` replaces the chunks between IHDR and IEND.

    ``total_size`` pads the image with a private ancillary chunk to exactly that many bytes.
    """
    chunks = (png_chunk(b"IDAT", zlib.compress(b"\x00\x00")),) if middle is None else middle
    head = PNG_SIGNATURE + png_chunk(b"IHDR", png_ihdr() if ihdr is None else ihdr)
    tail = png_chunk(b"IEND", b"")
    body = b"".join(chunks)
    if total_size is not None:
        padding = total_size - len(head) - len(body) - len(tail) - 12
        body = png_chunk(b"prVt", b"\x00" * padding) + body
    return head + body + tail


def jpeg_segment(marker: int, payload: bytes) -> bytes:
    """One JPEG marker segment: 0xFF, the marker, a length that counts itself, the payload."""
    return bytes((0xFF, marker)) + struct.pack(">H", len(payload) + 2) + payload


def jpeg_sof0(*, width: int = 1, height: int = 1, components: int = 1) -> bytes:
    """A baseline frame header (SOF0) segment with 8-bit samples."""
    specs = b"".join(bytes((index + 1, 0x11, 0)) for index in range(components))
    return jpeg_segment(0xC0, struct.pack(">BHHB", 8, height, width, components) + specs)


JPEG_JFIF = jpeg_segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
JPEG_DQT = jpeg_segment(0xDB, b"\x00" + b"\x01" * 64)
# One Huffman code of length 1 in each table: DC category 0, and AC end-of-block.
JPEG_DHT = jpeg_segment(0xC4, b"\x00\x01" + b"\x00" * 15 + b"\x00") + jpeg_segment(
    0xC4, b"\x10\x01" + b"\x00" * 15 + b"\x00"
)
JPEG_SOS = jpeg_segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
# The bits 0 (DC difference 0) and 0 (end of block), padded with ones.
JPEG_SCAN = b"\x3f"


def jpeg(*, segments: tuple[bytes, ...] | None = None, scan: bytes = JPEG_SCAN) -> bytes:
    """A 1x1 grayscale baseline JPEG; ``segments`` replaces the segments before SOS."""
    header = (JPEG_JFIF, JPEG_DQT, jpeg_sof0(), JPEG_DHT) if segments is None else segments
    return b"\xff\xd8" + b"".join(header) + JPEG_SOS + scan + b"\xff\xd9"


GIF_IMAGE_DATA = b"\x02\x02\x44\x01\x00"
"""LZW minimum code size 2, then clear, index 0, end, in one sub-block, and the terminator."""


def gif_descriptor(*, width: int = 1, height: int = 1, packed: int = 0) -> bytes:
    """An image descriptor at the top-left of the screen."""
    return b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, packed)


def gif(
    *,
    version: bytes = b"GIF89a",
    width: int = 1,
    height: int = 1,
    packed: int = 0x80,
    color_table: bytes = b"\x00\x00\x00\xff\xff\xff",
    blocks: tuple[bytes, ...] | None = None,
    trailer: bytes = b";",
) -> bytes:
    """A 1x1 GIF with a two-color global table; ``blocks`` replaces what follows the table."""
    body = (
        (b"\x21\xf9\x04\x01\x00\x00\x00\x00", gif_descriptor(), GIF_IMAGE_DATA)
        if blocks is None
        else blocks
    )
    screen = struct.pack("<HHBBB", width, height, packed, 0, 0)
    return version + screen + color_table + b"".join(body) + trailer


def riff_chunk(kind: bytes, payload: bytes, *, pad: bool = True) -> bytes:
    """One RIFF chunk, with the pad byte an odd payload needs."""
    padding = b"\x00" if pad and len(payload) % 2 else b""
    return kind + struct.pack("<I", len(payload)) + payload + padding


def webp(*chunks: bytes, riff_size_delta: int = 0, form: bytes = b"WEBP") -> bytes:
    """A RIFF WebP container around ``chunks``; ``riff_size_delta`` makes its size wrong."""
    body = form + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body) + riff_size_delta) + body


def vp8_payload(
    *,
    key_frame: bool = True,
    version: int = 0,
    show_frame: bool = True,
    first_partition_size: int = 8,
    start_code: bytes = b"\x9d\x01\x2a",
    width: int = 1,
    height: int = 1,
    size: int = 20,
) -> bytes:
    """A VP8 key frame header followed by zero bytes up to ``size``.

    Structurally a VP8 frame; its partitions are not a decodable picture.
    """
    tag = (0 if key_frame else 1) | version << 1 | int(show_frame) << 4
    tag |= first_partition_size << 5
    head = tag.to_bytes(3, "little") + start_code + struct.pack("<HH", width, height)
    return head + b"\x00" * (size - len(head))


def vp8l_payload(*, signature: int = 0x2F, version: int = 0) -> bytes:
    """A 1x1 lossless bitstream: the header, then five one-symbol prefix codes.

    No transform, no color cache, no meta codes; each code is "simple, one 1-bit symbol 0",
    so the one pixel is transparent black and takes no bits.
    """
    header = bytes((signature,)) + (version << 29).to_bytes(4, "little")
    return header + b"\x88\x88\x08"


def vp8x_payload(*, flags: int = 0, width: int = 1, height: int = 1, size: int = 10) -> bytes:
    """The VP8X header: flags, three reserved bytes, and the canvas size minus one."""
    head = bytes((flags, 0, 0, 0)) + (width - 1).to_bytes(3, "little")
    head += (height - 1).to_bytes(3, "little")
    return (head + b"\x00" * size)[:size]


def webp_lossy() -> bytes:
    """A simple-format lossy WebP: one VP8 chunk."""
    return webp(riff_chunk(b"VP8 ", vp8_payload()))


def webp_lossless() -> bytes:
    """A simple-format lossless WebP: one VP8L chunk."""
    return webp(riff_chunk(b"VP8L", vp8l_payload()))


def webp_extended() -> bytes:
    """An extended-format WebP: a VP8X chunk, then the VP8L image."""
    return webp(riff_chunk(b"VP8X", vp8x_payload()), riff_chunk(b"VP8L", vp8l_payload()))


VALID_IMAGES: dict[str, tuple[bytes, str]] = {
    "png": (png(), "image/png"),
    "jpeg": (jpeg(), "image/jpeg"),
    "gif": (gif(), "image/gif"),
    "webp lossy": (webp_lossy(), "image/webp"),
    "webp lossless": (webp_lossless(), "image/webp"),
    "webp extended": (webp_extended(), "image/webp"),
}
"""One valid image of each kind, with its MIME type."""


_IDAT = png_chunk(b"IDAT", zlib.compress(b"\x00\x00"))
_VP8L = riff_chunk(b"VP8L", vp8l_payload())
_JPEG_SOF2_YCBCR = jpeg_segment(
    0xC2, b"\x08\x00\x01\x00\x01\x03\x01\x11\x00\x02\x11\x00\x03\x11\x00"
)

VALID_IMAGE_VARIANTS: dict[str, tuple[bytes, str]] = {
    **VALID_IMAGES,
    "png rgba 16-bit, interlaced": (
        png(ihdr=png_ihdr(bit_depth=16, color_type=6, interlace=1)),
        "image/png",
    ),
    "png palette with PLTE": (
        png(ihdr=png_ihdr(color_type=3), middle=(png_chunk(b"PLTE", b"\x00\x00\x00"), _IDAT)),
        "image/png",
    ),
    "png with text and two IDAT chunks": (
        png(middle=(png_chunk(b"tEXt", b"a\x00b"), _IDAT, png_chunk(b"IDAT", b""))),
        "image/png",
    ),
    "jpeg with fill bytes before a marker": (
        jpeg(segments=(JPEG_JFIF, b"\xff\xff", JPEG_DQT, jpeg_sof0(), JPEG_DHT)),
        "image/jpeg",
    ),
    "jpeg progressive, comment first, three components": (
        jpeg(segments=(jpeg_segment(0xFE, b"hi"), JPEG_DQT, _JPEG_SOF2_YCBCR, JPEG_DHT)),
        "image/jpeg",
    ),
    "jpeg SOI, SOF0, SOS, EOI only": (jpeg(segments=(jpeg_sof0(),), scan=b""), "image/jpeg"),
    "gif87a": (gif(version=b"GIF87a"), "image/gif"),
    "gif with a local color table only": (
        gif(
            packed=0,
            color_table=b"",
            blocks=(gif_descriptor(packed=0x80), b"\x00\x00\x00\xff\xff\xff", GIF_IMAGE_DATA),
        ),
        "image/gif",
    ),
    "gif with a comment and two frames": (
        gif(blocks=(b"\x21\xfe\x03abc\x00", gif_descriptor(), GIF_IMAGE_DATA) * 2),
        "image/gif",
    ),
    "webp extended animation": (
        webp(
            riff_chunk(b"VP8X", vp8x_payload(flags=0x02)),
            riff_chunk(b"ANIM", b"\x00" * 6),
            riff_chunk(b"ANMF", b"\x00" * 16 + _VP8L),
        ),
        "image/webp",
    ),
    "webp extended with an odd, padded EXIF chunk": (
        webp(riff_chunk(b"VP8X", vp8x_payload(flags=0x08)), _VP8L, riff_chunk(b"EXIF", b"abc")),
        "image/webp",
    ),
    "webp canvas 65535x65536": (
        webp(riff_chunk(b"VP8X", vp8x_payload(width=65535, height=65536)), _VP8L),
        "image/webp",
    ),
    "webp lossy with a trailing chunk": (
        webp(riff_chunk(b"VP8 ", vp8_payload()), riff_chunk(b"XMP ", b"<x/>")),
        "image/webp",
    ),
}
"""Well-formed images of each format, with their MIME types: every one must be detected."""


def _with_bad_ihdr_crc() -> bytes:
    data = png()
    return data[:29] + b"\x00\x00\x00\x00" + data[33:]


MALFORMED_BUT_DETECTED: dict[str, tuple[bytes, str]] = {
    "png IHDR with a bad CRC": (_with_bad_ihdr_crc(), "image/png"),
    "png signature and IHDR chunk header only": (png()[:16], "image/png"),
    "png width 0": (png(ihdr=png_ihdr(width=0)), "image/png"),
    "png height 2**31": (png(ihdr=png_ihdr(height=2**31)), "image/png"),
    "png RGB of bit depth 4": (png(ihdr=png_ihdr(bit_depth=4, color_type=2)), "image/png"),
    "png color type 5": (png(ihdr=png_ihdr(color_type=5)), "image/png"),
    "png compression method 1": (png(ihdr=png_ihdr(compression=1)), "image/png"),
    "png interlace method 2": (png(ihdr=png_ihdr(interlace=2)), "image/png"),
    "png without IEND": (png()[:-12], "image/png"),
    "png cut inside IDAT": (png()[:40], "image/png"),
    "png with a byte after IEND": (png() + b"\x00", "image/png"),
    "png without IDAT": (png(middle=()), "image/png"),
    "png palette without PLTE": (png(ihdr=png_ihdr(color_type=3), middle=(_IDAT,)), "image/png"),
    "png with a second IHDR": (png(middle=(png_chunk(b"IHDR", png_ihdr()), _IDAT)), "image/png"),
    "png with a non-letter chunk type": (png(middle=(png_chunk(b"a1bc", b""), _IDAT)), "image/png"),
    "png IEND with data": (png()[:-12] + png_chunk(b"IEND", b"x"), "image/png"),
    "jpeg SOI, APP0, EOI": (b"\xff\xd8" + JPEG_JFIF + b"\xff\xd9", "image/jpeg"),
    "jpeg of 6 bytes: SOI, a marker, EOI": (b"\xff\xd8\xff\xe0\xff\xd9", "image/jpeg"),
    "jpeg cut inside a segment": (jpeg()[:30] + b"\xff\xd9", "image/jpeg"),
    "jpeg segment length 0": (b"\xff\xd8\xff\xe0\x00\x00" + jpeg()[2:], "image/jpeg"),
    "jpeg segment length 1": (b"\xff\xd8\xff\xe0\x00\x01" + jpeg()[2:], "image/jpeg"),
    "jpeg without a frame header": (jpeg(segments=(JPEG_JFIF, JPEG_DQT, JPEG_DHT)), "image/jpeg"),
    "jpeg with two frame headers": (jpeg(segments=(jpeg_sof0(), jpeg_sof0())), "image/jpeg"),
    "jpeg frame width 0": (jpeg(segments=(jpeg_sof0(width=0),)), "image/jpeg"),
    "jpeg frame height 0": (jpeg(segments=(jpeg_sof0(height=0),)), "image/jpeg"),
    "jpeg frame of 0 components": (jpeg(segments=(jpeg_sof0(components=0),)), "image/jpeg"),
    "jpeg frame length not 8 + 3 per component": (
        jpeg(segments=(jpeg_segment(0xC0, b"\x08\x00\x01\x00\x01\x02\x01\x11\x00"),)),
        "image/jpeg",
    ),
    "jpeg restart marker in the header": (jpeg(segments=(b"\xff\xd0\x00\x02", jpeg_sof0())), "image/jpeg"),
    "jpeg stuffed zero in the header": (jpeg(segments=(b"\xff\x00\x00\x02", jpeg_sof0())), "image/jpeg"),
    "jpeg EOI in the header": (jpeg(segments=(b"\xff\xd9\x00\x02", jpeg_sof0())), "image/jpeg"),
    "gif header and screen descriptor only": (gif()[:13], "image/gif"),
    "gif screen width 0": (gif(width=0), "image/gif"),
    "gif screen height 0": (gif(height=0), "image/gif"),
    "gif global color table shorter than its size": (gif(packed=0x81), "image/gif"),
    "gif without trailer": (gif(trailer=b""), "image/gif"),
    "gif with a byte after the trailer": (gif(trailer=b";\x00"), "image/gif"),
    "gif without an image": (gif(blocks=(b"\x21\xfe\x03abc\x00",)), "image/gif"),
    "gif image width 0": (gif(blocks=(gif_descriptor(width=0), GIF_IMAGE_DATA)), "image/gif"),
    "gif LZW code size 1": (gif(blocks=(gif_descriptor(), b"\x01" + GIF_IMAGE_DATA[1:])), "image/gif"),
    "gif LZW code size 9": (gif(blocks=(gif_descriptor(), b"\x09" + GIF_IMAGE_DATA[1:])), "image/gif"),
    "gif cut inside image data": (
        gif(blocks=(gif_descriptor(), GIF_IMAGE_DATA[:3]), trailer=b""),
        "image/gif",
    ),
    "gif unknown block": (gif(blocks=(b"\x00", gif_descriptor(), GIF_IMAGE_DATA)), "image/gif"),
    "webp first chunk fourcc only": (webp(b"VP8L"), "image/webp"),
    "webp VP8 interframe": (webp(riff_chunk(b"VP8 ", vp8_payload(key_frame=False))), "image/webp"),
    "webp VP8 version 4": (webp(riff_chunk(b"VP8 ", vp8_payload(version=4))), "image/webp"),
    "webp VP8 frame not shown": (webp(riff_chunk(b"VP8 ", vp8_payload(show_frame=False))), "image/webp"),
    "webp VP8 bad start code": (
        webp(riff_chunk(b"VP8 ", vp8_payload(start_code=b"\x9d\x01\x2b"))),
        "image/webp",
    ),
    "webp VP8 width 0": (webp(riff_chunk(b"VP8 ", vp8_payload(width=0))), "image/webp"),
    "webp VP8 partition as large as the chunk": (
        webp(riff_chunk(b"VP8 ", vp8_payload(first_partition_size=20))),
        "image/webp",
    ),
    "webp VP8 chunk of 8 bytes": (webp(riff_chunk(b"VP8 ", vp8_payload()[:8])), "image/webp"),
    "webp VP8L bad signature": (webp(riff_chunk(b"VP8L", vp8l_payload(signature=0x2E))), "image/webp"),
    "webp VP8L version 1": (webp(riff_chunk(b"VP8L", vp8l_payload(version=1))), "image/webp"),
    "webp VP8L chunk of 4 bytes": (webp(riff_chunk(b"VP8L", vp8l_payload()[:4])), "image/webp"),
    "webp VP8X chunk of 12 bytes": (webp(riff_chunk(b"VP8X", vp8x_payload(size=12)), _VP8L), "image/webp"),
    "webp VP8X without an image": (
        webp(riff_chunk(b"VP8X", vp8x_payload()), riff_chunk(b"EXIF", b"ab")),
        "image/webp",
    ),
    "webp VP8X canvas 65536x65536": (
        webp(riff_chunk(b"VP8X", vp8x_payload(width=65536, height=65536)), _VP8L),
        "image/webp",
    ),
    "webp second VP8X": (
        webp(riff_chunk(b"VP8X", vp8x_payload()), _VP8L, riff_chunk(b"VP8X", vp8x_payload())),
        "image/webp",
    ),
    "webp odd chunk without its pad byte": (
        webp(_VP8L, riff_chunk(b"EXIF", b"abc", pad=False)),
        "image/webp",
    ),
    "webp chunk longer than the data": (webp(riff_chunk(b"VP8L", vp8l_payload())[:-2]), "image/webp"),
    "webp partial chunk header at the end": (webp(_VP8L, b"EXIF"), "image/webp"),
}  # fmt: skip
"""Bytes that break their format only where the spec's cheap check does not look.

The check is not a full decode, so every core detects each of these as its MIME type.
"""


BROKEN_IMAGES: dict[str, bytes] = {
    "empty": b"",
    "text": b"hello, this is not an image",
    "png signature only": PNG_SIGNATURE,
    "png with a bad signature": b"\x89PNG\r\n\x1a\x00" + png()[8:],
    "png cut inside the IHDR chunk header": png()[:15],
    "png IHDR of 12 bytes": PNG_SIGNATURE + png_chunk(b"IHDR", png_ihdr()[:12]) + png()[33:],
    "png IHDR length 2**32 - 1": PNG_SIGNATURE + b"\xff\xff\xff\xffIHDR" + png()[16:],
    "png IHDR type in lower case": PNG_SIGNATURE + png_chunk(b"ihdr", png_ihdr()) + png()[33:],
    "png first chunk not IHDR": PNG_SIGNATURE + _IDAT + png_chunk(b"IEND", b""),
    "jpeg without SOI": jpeg()[2:],
    "jpeg SOI and EOI only": b"\xff\xd8\xff\xd9",
    "jpeg of 5 bytes: SOI, a fill byte, EOI": b"\xff\xd8\xff\xff\xd9",
    "jpeg without EOI": jpeg()[:-2],
    "jpeg with a byte after EOI": jpeg() + b"\x00",
    "jpeg SOI then a non-marker byte": b"\xff\xd8\x00" + jpeg()[2:],
    "jpeg scan without data or EOI": b"\xff\xd8" + jpeg_sof0() + JPEG_SOS,
    "gif header only": b"GIF89a",
    "gif of 12 bytes": gif()[:12],
    "gif version 88a": gif(version=b"GIF88a"),
    "gif version in lower case": gif(version=b"gif89a"),
    "webp RIFF size 2 more than the data": webp(_VP8L, riff_size_delta=2),
    "webp RIFF size 2 less than the data": webp(_VP8L, riff_size_delta=-2),
    "webp RIFF size 2**32 - 1": b"RIFF\xff\xff\xff\xff" + webp(_VP8L)[8:],
    "webp big-endian RIFX": b"RIFX" + webp(_VP8L)[4:],
    "webp RIFF of WAVE": webp(_VP8L, form=b"WAVE"),
    "webp RIFF and WEBP without a chunk": webp(),
    "webp first chunk ALPH": webp(riff_chunk(b"ALPH", b"\x00\x00"), _VP8L),
    "webp first chunk VP8Z": webp(riff_chunk(b"VP8Z", vp8l_payload())),
    "webp first chunk vp8l in lower case": webp(riff_chunk(b"vp8l", vp8l_payload())),
}  # fmt: skip
"""Bytes that fail one of the spec's listed checks: every one must be refused."""
