"""The body watch passes a body on as it came, whatever its pieces, and reads each line whole."""

from __future__ import annotations

import binascii
import gzip
import json
import struct
import zlib
from collections.abc import AsyncIterator

import httpx
import pytest

from dex_agents.adapters.litellm.anthropic_stop import AnthropicStopWatch
from dex_agents.adapters.litellm.bedrock_stop import BedrockStreamWatch
from dex_agents.adapters.litellm.body_watch import BodyWatch, watch_response
from dex_agents.adapters.litellm.gemini_finish import GeminiFinishWatch
from tests.adapters.litellm.bedrock_scripts import EVENT_STREAM, converse_frames
from tests.adapters.litellm.provider_scripts import gemini_stream

BODY = "".join(
    f"data: {json.dumps(chunk)}\r\n\r\n"
    for _, chunk in gemini_stream([{"text": "Order 7 is late."}])
).encode()


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, body: bytes, size: int) -> None:
        self._pieces = [body[i : i + size] for i in range(0, len(body), size)]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


def _response(body: bytes, size: int, content_type: str, **headers: str) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": content_type, **headers}, stream=_Pieces(body, size)
    )


@pytest.mark.parametrize("size", [1, 7, 64, len(BODY)])
async def test_a_stream_in_any_pieces_passes_on_unchanged_and_read_whole(size: int) -> None:
    watch = GeminiFinishWatch()
    response = _response(BODY, size, "text/event-stream")
    assert watch_response(response, watch)
    assert await response.aread() == BODY
    assert watch.finished
    assert not watch.cut


async def test_a_json_error_body_in_pieces_is_read_whole() -> None:
    body = json.dumps(
        {"error": {"message": "Overloaded", "type": "overloaded_error"}}, indent=2
    ).encode()
    watch = BodyWatch()
    response = _response(body, 5, "application/json; charset=utf-8")
    assert watch_response(response, watch)
    assert await response.aread() == body
    assert watch.error is not None
    assert (watch.error.message, watch.error.retryable, watch.error.in_stream) == (
        "Overloaded",
        True,
        False,
    )


ERROR_BODY = json.dumps({"error": {"message": "Overloaded", "type": "overloaded_error"}}).encode()


def _raw_deflate(body: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(body) + compressor.flush()


@pytest.mark.parametrize(
    ("encoding", "compressed"),
    [
        ("gzip", gzip.compress(ERROR_BODY)),
        ("deflate", zlib.compress(ERROR_BODY)),
        ("deflate", _raw_deflate(ERROR_BODY)),
        ("identity, GZIP", gzip.compress(ERROR_BODY)),
    ],
    ids=["gzip", "deflate", "raw-deflate", "listed"],
)
async def test_a_compressed_body_passes_on_as_sent_and_is_read_decompressed(
    encoding: str, compressed: bytes
) -> None:
    watch = BodyWatch()
    response = _response(compressed, 3, "application/json", **{"content-encoding": encoding})
    assert watch_response(response, watch)
    assert await response.aread() == ERROR_BODY  # httpx decoded what passed on
    assert watch.error is not None
    assert watch.error.message == "Overloaded"


@pytest.mark.parametrize("frames", [1, 2])
async def test_a_zstd_body_passes_on_as_sent_and_is_read_decompressed(frames: int) -> None:
    # httpx asks for zstd where its decoder is installed, and reads a body of several frames.
    zstandard = pytest.importorskip("zstandard")
    cut = len(ERROR_BODY) // frames
    parts = [ERROR_BODY[:cut], ERROR_BODY[cut:]] if frames == 2 else [ERROR_BODY]
    compressed = b"".join(zstandard.ZstdCompressor().compress(part) for part in parts)
    watch = BodyWatch()
    response = _response(compressed, 3, "application/json", **{"content-encoding": "zstd"})
    assert watch_response(response, watch)
    assert await response.aread() == ERROR_BODY  # httpx decoded what passed on
    assert watch.error is not None
    assert watch.error.message == "Overloaded"


async def test_a_compressed_stream_is_read_but_not_mended() -> None:
    watch = GeminiFinishWatch()
    response = _response(
        gzip.compress(BODY), 9, "text/event-stream", **{"content-encoding": "gzip"}
    )
    assert watch_response(response, watch)
    assert await response.aread() == BODY
    assert watch.finished


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
async def test_a_body_that_does_not_decompress_is_judged_by_nothing(encoding: str) -> None:
    if encoding == "zstd":
        pytest.importorskip("zstandard")
    watch = GeminiFinishWatch()
    response = _response(
        b"\x1f\x8bnot compressed", 2, "text/event-stream", **{"content-encoding": encoding}
    )
    assert watch_response(response, watch)
    with pytest.raises(httpx.DecodingError):
        await response.aread()
    assert not watch.cut  # read as LiteLLM reads it, not as a stream that said nothing


# httpx here neither asks for nor decodes br (no brotli installed).
@pytest.mark.parametrize("encoding", ["br", "gzip, deflate"])
async def test_a_body_of_another_encoding_is_not_watched(encoding: str) -> None:
    watch = GeminiFinishWatch()
    response = _response(b"\x1f\x8b", 2, "text/event-stream", **{"content-encoding": encoding})
    assert not watch_response(response, watch)
    assert not watch.cut  # read as LiteLLM reads it, not as a stream that said nothing


CONVERSE = b"".join(converse_frames("Half of", stop_reason="model_context_window_exceeded"))


@pytest.mark.parametrize("size", [1, 7, 64, len(CONVERSE)])
async def test_an_event_stream_in_any_pieces_passes_on_unchanged_and_is_read_whole(
    size: int,
) -> None:
    watch = BedrockStreamWatch()
    response = _response(CONVERSE, size, EVENT_STREAM)
    assert watch_response(response, watch)
    assert await response.aread() == CONVERSE
    assert (watch.stop_reason, watch.finish_reason) == ("model_context_window_exceeded", "length")
    assert watch.error is None


async def test_an_event_stream_that_does_not_decode_passes_on_and_is_read_no_further() -> None:
    # LiteLLM's own decoder fails on it and says so; the watch judges nothing after it.
    broken = CONVERSE[:20] + b"\x00" + CONVERSE[21:]
    watch = BedrockStreamWatch()
    response = _response(broken, 9, EVENT_STREAM)
    assert watch_response(response, watch)
    assert await response.aread() == broken
    assert (watch.stop_reason, watch.finish_reason, watch.failed_reason) == (None, None, None)


@pytest.mark.parametrize(
    "line",
    [
        b'data: ["model_context_window_exceeded"]',
        b"data: model_context_window_exceeded",
        b'data: "model_context_window_exceeded"',
    ],
    ids=["array", "not-json", "string"],
)
def test_an_anthropic_line_that_is_no_event_passes_on_unread(line: bytes) -> None:
    # The watch raised AttributeError on it inside the body: a retryable stream
    # break of the watch's own making, met again by every retry.
    watch = AnthropicStopWatch()
    assert watch.read_line(line) == line
    assert watch.finish_reason is None


def test_an_anthropic_stop_for_the_context_window_is_read() -> None:
    watch = AnthropicStopWatch()
    line = (
        b'data: {"type": "message_delta", "delta": '
        b'{"stop_reason": "model_context_window_exceeded"}, "usage": {"output_tokens": 3}}'
    )
    assert watch.read_line(line) == line
    assert watch.finish_reason == "length"


async def test_an_event_stream_message_botocore_reads_does_not_stop_the_watch() -> None:
    # A header time past the year 9999, which botocore (LiteLLM's decoder) reads
    # as its milliseconds: the watch read no further, and the stop after it was lost.
    raw = bytes([1]) + b"x" + bytes([8]) + struct.pack("!q", 2**62)
    prelude = struct.pack("!II", 12 + len(raw) + 2 + 4, len(raw))
    message = prelude + struct.pack("!I", binascii.crc32(prelude)) + raw + b"{}"
    body = message + struct.pack("!I", binascii.crc32(message)) + CONVERSE
    watch = BedrockStreamWatch()
    response = _response(body, 5, EVENT_STREAM)
    assert watch_response(response, watch)
    assert await response.aread() == body
    assert (watch.stop_reason, watch.finish_reason) == ("model_context_window_exceeded", "length")
