"""Bedrock's ``converse-stream`` answers, for ``ProviderServer`` to send as binary frames.

Bedrock streams in the AWS event stream encoding
(``application/vnd.amazon.eventstream``): each message a prelude (total and
header lengths, with a CRC32), string headers (``:event-type``,
``:message-type``), a JSON payload, and a CRC32 of the whole. ``converse_frames``
builds a Converse answer's events: ``messageStart``, each content block's
deltas (a tool call's input split across two of them, as Bedrock streams it),
``messageStop`` and the ``metadata`` event that holds the usage.
``invoke_reply`` answers ``InvokeModelWithResponseStream`` for Claude: Anthropic's
own events, each base64-encoded in a ``chunk`` event. ``bedrock_env`` sets the
AWS credentials LiteLLM signs the request with.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.adapters.litellm.provider_scripts import anthropic_stream
from tests.adapters.litellm.provider_server import Reply, frames_reply

EVENT_STREAM = "application/vnd.amazon.eventstream"

BEDROCK_USAGE: Mapping[str, Any] = {"inputTokens": 60, "outputTokens": 7, "totalTokens": 67}


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    # Header value type 7 is a string, its length in two bytes.
    return (
        struct.pack("!B", len(raw_name))
        + raw_name
        + struct.pack("!BH", 7, len(raw_value))
        + raw_value
    )


def frame(headers: Mapping[str, str], payload: Mapping[str, Any]) -> bytes:
    """One event stream message of ``headers`` and the JSON ``payload``."""
    raw_headers = b"".join(_header(name, value) for name, value in headers.items())
    body = json.dumps(payload).encode()
    prelude = struct.pack("!II", 12 + len(raw_headers) + len(body) + 4, len(raw_headers))
    message = prelude + struct.pack("!I", binascii.crc32(prelude)) + raw_headers + body
    return message + struct.pack("!I", binascii.crc32(message))


def event(kind: str, payload: Mapping[str, Any]) -> bytes:
    """A Converse stream event of ``kind`` (``messageStart``, ``contentBlockDelta``...)."""
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, payload)


def exception(kind: str, message: str, **fields: Any) -> bytes:
    """An error Bedrock sends inside the stream, such as ``throttlingException``.

    ``fields`` are the event's further members, such as a
    ``modelStreamErrorException``'s ``originalStatusCode`` and ``originalMessage``.
    """
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, {"message": message, **fields})


def converse_frames(
    text: str | None = "Hello.",
    tool_calls: Sequence[tuple[str, str, str]] = (),
    *,
    stop_reason: str | None = None,
    usage: Mapping[str, Any] | None = BEDROCK_USAGE,
) -> list[bytes]:
    """The events of an answer with ``text`` and ``(id, name, arguments)`` tool calls.

    ``usage=None`` leaves the ``metadata`` event out.
    """
    frames = [event("messageStart", {"role": "assistant"})]
    index = 0
    if text:
        for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
            delta = {"contentBlockIndex": index, "delta": {"text": piece}}
            frames.append(event("contentBlockDelta", delta))
        frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for call_id, name, arguments in tool_calls:
        start = {"toolUse": {"toolUseId": call_id, "name": name}}
        frames.append(event("contentBlockStart", {"contentBlockIndex": index, "start": start}))
        for part in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
            delta = {"contentBlockIndex": index, "delta": {"toolUse": {"input": part}}}
            frames.append(event("contentBlockDelta", delta))
        frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    stop = stop_reason or ("tool_use" if tool_calls else "end_turn")
    frames.append(event("messageStop", {"stopReason": stop}))
    if usage is not None:
        frames.append(event("metadata", {"usage": dict(usage), "metrics": {"latencyMs": 120}}))
    return frames


def converse_reply(
    text: str | None = "Hello.", tool_calls: Sequence[tuple[str, str, str]] = (), **options: Any
) -> Reply:
    return frames_reply(converse_frames(text, tool_calls, **options), EVENT_STREAM)


def invoke_reply(blocks: Sequence[Mapping[str, Any]], **options: Any) -> Reply:
    """Claude's ``anthropic_stream(blocks, **options)`` as Bedrock's invoke stream sends it."""
    frames = [
        event("chunk", {"bytes": base64.b64encode(json.dumps(data).encode()).decode()})
        for _, data in anthropic_stream(blocks, **options)
    ]
    return frames_reply(frames, EVENT_STREAM)


def bedrock_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS credentials and a region in the environment, as a Worker on AWS has them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEY000000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "bedrock-test-secret-0000000000000000000000")
    monkeypatch.setenv("AWS_REGION_NAME", "us-east-1")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEDROCK_RUNTIME_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
