"""The body watch passes a body on as it came, whatever its pieces, and reads each line whole."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from dex_agents.adapters.litellm.body_watch import BodyWatch, watch_response
from dex_agents.adapters.litellm.gemini_finish import GeminiFinishWatch
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


async def test_a_compressed_body_is_not_watched() -> None:
    watch = GeminiFinishWatch()
    response = _response(b"\x1f\x8b", 2, "text/event-stream", **{"content-encoding": "gzip"})
    assert not watch_response(response, watch)
    assert not watch.cut  # read as LiteLLM reads it, not as a stream that said nothing
