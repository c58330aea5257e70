"""The AWS event stream encoding (``application/vnd.amazon.eventstream``), decoded as it comes.

Bedrock streams a Converse answer as binary messages, each:

- a 12-byte prelude: the message's total length and its headers' length
  (big-endian 32-bit), and the CRC32 of those 8 bytes;
- the headers, each a name (a length byte and UTF-8 text), a value type
  byte and a value whose size the type gives (``:event-type``,
  ``:message-type``, ``:content-type`` are strings);
- the payload (JSON for Bedrock's events);
- the CRC32 of every byte of the message before it.

``EventStreamDecoder`` takes a body in the pieces it arrives in, a message
split across them included, and returns each message once it is whole. A
message whose lengths or CRCs do not hold raises ``EventStreamFormatError``:
the stream is no longer readable from there, for LiteLLM (botocore's decoder)
either. The rules and limits are botocore's (a header named twice refuses a
message, a time of any size reads), so a message either reads both or neither.
"""

from __future__ import annotations

import binascii
import struct
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final, TypeAlias

import attrs

from dex_agents.adapters.litellm.errors import EventStreamFormatError

PRELUDE_LENGTH: Final = 12
"""The total length, the headers' length, and their CRC32."""

MAX_HEADERS_LENGTH: Final = 128 * 1024
"""The most header bytes a message may have (botocore's limit)."""

MAX_PAYLOAD_LENGTH: Final = 24 * 1024 * 1024
"""The most payload bytes a message may have (botocore's limit)."""

HeaderValue: TypeAlias = bool | int | bytes | str | datetime | uuid.UUID
"""A header's value: by its type byte, a boolean, an integer, bytes, text, a time or a UUID.

A time a ``datetime`` cannot hold is its milliseconds since the epoch."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@attrs.frozen(kw_only=True)
class EventStreamMessage:
    """One whole message of the stream: its headers by name, and its payload's bytes."""

    headers: Mapping[str, HeaderValue]
    payload: bytes

    def header(self, name: str) -> str | None:
        """The text of header ``name``, or ``None`` when it is missing or not text."""
        value = self.headers.get(name)
        return value if isinstance(value, str) else None


def _signed(raw: bytes) -> HeaderValue:
    return int.from_bytes(raw, "big", signed=True)


def _time(raw: bytes) -> HeaderValue:
    milliseconds = int.from_bytes(raw, "big", signed=True)
    try:
        return _EPOCH + timedelta(milliseconds=milliseconds)
    except OverflowError:
        # Past what a datetime holds (the year 9999): botocore reads every
        # time as its milliseconds, so the message still reads, as those.
        return milliseconds


_VALUE_TYPES: Final[Mapping[int, tuple[int | None, Callable[[bytes], HeaderValue]]]] = {
    0: (0, lambda raw: True),
    1: (0, lambda raw: False),
    2: (1, _signed),
    3: (2, _signed),
    4: (4, _signed),
    5: (8, _signed),
    6: (None, bytes),
    7: (None, lambda raw: raw.decode("utf-8")),
    8: (8, _time),
    9: (16, lambda raw: uuid.UUID(bytes=raw)),
}
"""Each value type byte: its value's size (``None``: a 2-byte length first), and its reading."""


def _take(raw: bytes, at: int, size: int) -> bytes:
    """``size`` bytes of ``raw`` from ``at``; raises when the headers end before them."""
    taken = raw[at : at + size]
    if len(taken) != size:
        raise EventStreamFormatError("a header runs past the headers' length")
    return taken


def decode_headers(raw: bytes) -> dict[str, HeaderValue]:
    """The headers ``raw`` holds, all of it; raises ``EventStreamFormatError`` if it holds other."""
    headers: dict[str, HeaderValue] = {}
    at = 0
    while at < len(raw):
        name_length = raw[at]
        raw_name = _take(raw, at + 1, name_length)
        at += 1 + name_length
        kind = _take(raw, at, 1)[0]
        at += 1
        if kind not in _VALUE_TYPES:
            raise EventStreamFormatError(f"a header has unknown value type {kind}")
        size, read = _VALUE_TYPES[kind]
        if size is None:
            (size,) = struct.unpack("!H", _take(raw, at, 2))
            at += 2
        value = _take(raw, at, size)
        at += size
        try:
            name = raw_name.decode("utf-8")
            read_value = read(value)
        except UnicodeDecodeError as error:
            raise EventStreamFormatError(f"a header is not UTF-8 text: {error}") from error
        if name in headers:  # botocore refuses it too
            raise EventStreamFormatError(f"a message names header {name} twice")
        headers[name] = read_value
    return headers


def _check_crc(data: bytes, expected: int, what: str) -> None:
    computed = binascii.crc32(data) & 0xFFFFFFFF
    if computed != expected:
        raise EventStreamFormatError(
            f"the {what} CRC is {expected:#010x}, the bytes' is {computed:#010x}"
        )


class EventStreamDecoder:
    """Messages of one event stream body, from its pieces in the order they came."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, piece: bytes) -> list[EventStreamMessage]:
        """The messages ``piece`` completes, in order; the rest is kept for the next piece.

        Raises ``EventStreamFormatError`` for a message that does not hold (after
        returning the messages before it, at the next piece), and again for every
        later piece: nothing after it is read.
        """
        self._buffer += piece
        messages: list[EventStreamMessage] = []
        while True:
            try:
                message = self._next_message()
            except EventStreamFormatError:
                if messages:
                    return messages  # the next piece raises it
                raise
            if message is None:
                return messages
            messages.append(message)

    def _next_message(self) -> EventStreamMessage | None:
        """The first message of the buffer once it is whole, taken out of it, or ``None``."""
        if len(self._buffer) < PRELUDE_LENGTH:
            return None
        total, headers_length, prelude_crc = struct.unpack_from("!III", self._buffer)
        _check_crc(bytes(self._buffer[:8]), prelude_crc, "prelude")
        payload_length = total - PRELUDE_LENGTH - headers_length - 4
        if headers_length > MAX_HEADERS_LENGTH or payload_length > MAX_PAYLOAD_LENGTH:
            raise EventStreamFormatError(
                f"a message of {headers_length} header and {payload_length} payload bytes "
                "is past the limits"
            )
        if payload_length < 0:
            raise EventStreamFormatError(
                f"a message of {total} bytes cannot hold {headers_length} header bytes"
            )
        if len(self._buffer) < total:
            return None
        message = bytes(self._buffer[:total])
        (message_crc,) = struct.unpack_from("!I", message, total - 4)
        _check_crc(message[:-4], message_crc, "message")
        headers_end = PRELUDE_LENGTH + headers_length
        headers = decode_headers(message[PRELUDE_LENGTH:headers_end])
        # Only a message that held leaves the buffer: one that did not stays
        # first, so every later piece raises again rather than read past it.
        del self._buffer[:total]
        return EventStreamMessage(headers=headers, payload=message[headers_end:-4])

    @property
    def pending(self) -> int:
        """How many bytes of a message not yet whole the decoder holds."""
        return len(self._buffer)
