"""The AWS event stream decoder: the prelude, the headers, both CRCs, and messages in any pieces."""

from __future__ import annotations

import binascii
import struct
import uuid
from datetime import UTC, datetime

import pytest

from dex_agents.adapters.litellm.aws_event_stream import (
    MAX_HEADERS_LENGTH,
    EventStreamDecoder,
    EventStreamMessage,
    HeaderValue,
    decode_headers,
)
from dex_agents.adapters.litellm.errors import EventStreamFormatError
from tests.adapters.litellm.bedrock_scripts import event, exception, frame


def _message(raw_headers: bytes, payload: bytes, *, total: int | None = None) -> bytes:
    """A message of ``raw_headers`` and ``payload`` with both CRCs right; ``total`` overrides its length."""
    length = 12 + len(raw_headers) + len(payload) + 4 if total is None else total
    prelude = struct.pack("!II", length, len(raw_headers))
    message = prelude + struct.pack("!I", binascii.crc32(prelude)) + raw_headers + payload
    return message + struct.pack("!I", binascii.crc32(message))


def _header(name: str, kind: int, value: bytes) -> bytes:
    return bytes([len(name)]) + name.encode() + bytes([kind]) + value


STOP = event("messageStop", {"stopReason": "end_turn"})
DELTA = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})
THROTTLED = exception("throttlingException", "Slow down.")


def test_a_message_reads_as_its_headers_and_payload() -> None:
    (message,) = EventStreamDecoder().feed(STOP)
    assert message == EventStreamMessage(
        headers={
            ":event-type": "messageStop",
            ":content-type": "application/json",
            ":message-type": "event",
        },
        payload=b'{"stopReason": "end_turn"}',
    )
    assert message.header(":event-type") == "messageStop"
    assert message.header(":exception-type") is None


@pytest.mark.parametrize("size", [1, 5, 12, 13, 40, len(DELTA) + 3])
def test_messages_split_across_pieces_read_whole_and_in_order(size: int) -> None:
    body = DELTA + THROTTLED + STOP
    decoder = EventStreamDecoder()
    messages = [
        message
        for at in range(0, len(body), size)
        for message in decoder.feed(body[at : at + size])
    ]
    assert [m.header(":event-type") or m.header(":exception-type") for m in messages] == [
        "contentBlockDelta",
        "throttlingException",
        "messageStop",
    ]
    assert messages[1].payload == b'{"message": "Slow down."}'
    assert decoder.pending == 0


def test_a_message_not_yet_whole_is_kept_for_the_next_piece() -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(STOP[:11]) == []  # not even the prelude
    assert decoder.feed(STOP[11:-1]) == []
    assert decoder.pending == len(STOP) - 1
    assert len(decoder.feed(STOP[-1:])) == 1


def test_an_empty_message_reads() -> None:
    (message,) = EventStreamDecoder().feed(_message(b"", b""))
    assert (dict(message.headers), message.payload) == ({}, b"")


NOW = datetime(2026, 12, 7, 23, 50, 30, 250000, tzinfo=UTC)
ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        (0, b"", True),
        (1, b"", False),
        (2, b"\xff", -1),
        (3, struct.pack("!h", -300), -300),
        (4, struct.pack("!i", 70000), 70000),
        (5, struct.pack("!q", -(2**40)), -(2**40)),
        (6, struct.pack("!H", 3) + b"\x00\x01\x02", b"\x00\x01\x02"),
        (7, struct.pack("!H", 7) + "stop é".encode(), "stop é"),
        (8, struct.pack("!q", int(NOW.timestamp() * 1000)), NOW),
        (8, struct.pack("!q", 2**62), 2**62),  # past the year 9999: its milliseconds
        (9, ID.bytes, ID),
    ],
    ids=[
        "true",
        "false",
        "byte",
        "short",
        "integer",
        "long",
        "bytes",
        "string",
        "time",
        "time-too-late",
        "uuid",
    ],
)
def test_each_header_value_type_reads(kind: int, raw: bytes, value: HeaderValue) -> None:
    assert decode_headers(_header("x", kind, raw)) == {"x": value}


def _with_byte_changed(message: bytes, at: int) -> bytes:
    return message[:at] + bytes([message[at] ^ 0x01]) + message[at + 1 :]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (_with_byte_changed(STOP, 3), "the prelude CRC"),  # the total length
        (_with_byte_changed(STOP, 9), "the prelude CRC"),  # the prelude's own CRC
        (_with_byte_changed(STOP, 20), "the message CRC"),  # a header
        (_with_byte_changed(STOP, len(STOP) - 5), "the message CRC"),  # the payload
        (_with_byte_changed(STOP, len(STOP) - 1), "the message CRC"),  # the message's CRC
        (_message(_header("x", 10, b""), b"{}"), "unknown value type 10"),
        (_message(_header("x", 7, struct.pack("!H", 9) + b"short"), b"{}"), "runs past"),
        (_message(b"\x05ab", b"{}"), "runs past"),  # a name longer than the headers
        (_message(_header("x", 7, struct.pack("!H", 2) + b"\xff\xfe"), b""), "not UTF-8 text"),
        (_message(_header("x", 0, b"") + _header("x", 1, b""), b""), "header x twice"),
        (_message(b"", b"", total=15), "cannot hold"),  # shorter than a prelude and a CRC
        (_message(b"\x00" * (MAX_HEADERS_LENGTH + 1), b""), "past the limits"),
    ],
    ids=[
        "total-length",
        "prelude-crc",
        "header",
        "payload",
        "message-crc",
        "value-type",
        "value-length",
        "name-length",
        "not-utf-8",
        "repeated-name",
        "too-short",
        "headers-too-long",
    ],
)
def test_a_message_that_does_not_hold_raises_and_so_does_every_later_piece(
    body: bytes, error: str
) -> None:
    decoder = EventStreamDecoder()
    with pytest.raises(EventStreamFormatError, match=error):
        decoder.feed(body)
    with pytest.raises(EventStreamFormatError, match=error):
        decoder.feed(STOP)  # nothing after it is read


def test_the_messages_before_one_that_does_not_hold_come_first() -> None:
    decoder = EventStreamDecoder()
    broken = _with_byte_changed(STOP, len(STOP) - 5)
    (delta,) = decoder.feed(DELTA + broken + STOP)
    assert delta.header(":event-type") == "contentBlockDelta"
    with pytest.raises(EventStreamFormatError, match="the message CRC"):
        decoder.feed(b"")


def test_the_test_frames_are_what_botocore_reads() -> None:
    # The frames the loopback Bedrock sends, read by the decoder LiteLLM uses.
    botocore = pytest.importorskip("botocore.eventstream")
    buffer = botocore.EventStreamBuffer()
    buffer.add_data(DELTA + frame({":message-type": "event"}, {"a": 1}))
    read = [(message.headers, message.payload) for message in buffer]
    ours = EventStreamDecoder().feed(DELTA + frame({":message-type": "event"}, {"a": 1}))
    assert read == [(dict(message.headers), message.payload) for message in ours]


def test_the_decoder_reads_what_botocore_reads_and_no_other() -> None:
    # The watch stops at a message LiteLLM's decoder still reads: the stop
    # reason after it was lost. A time past the year 9999 and a header named
    # twice are where they parted.
    botocore = pytest.importorskip("botocore.eventstream")
    late = _message(_header("x", 8, struct.pack("!q", 2**62)), b"{}")
    twice = _message(_header("x", 0, b"") + _header("x", 0, b""), b"{}")
    for body, reads in ((late, True), (twice, False)):
        buffer = botocore.EventStreamBuffer()
        buffer.add_data(body)
        try:
            botocore_read = len(list(buffer)) == 1
        except botocore.ParserError:
            botocore_read = False
        try:
            ours = len(EventStreamDecoder().feed(body)) == 1
        except EventStreamFormatError:
            ours = False
        assert (botocore_read, ours) == (reads, reads)
