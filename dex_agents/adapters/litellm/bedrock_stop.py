"""Why Bedrock's Converse stream stopped an answer, where LiteLLM does not keep it.

Bedrock names why an answer ended in the ``messageStop`` event's
``stopReason``. LiteLLM (1.105) maps the reasons it knows and reads every
other as ``"stop"``, keeping the provider's value nowhere, so an answer that
filled the model's context window (``model_context_window_exceeded``) read as
a whole one, and one the model failed to make (``malformed_model_output``,
``malformed_tool_use``, with no usable content) as an empty answer that ended
the turn. The stream is binary (``application/vnd.amazon.eventstream``): the
watch decodes its messages (``aws_event_stream``) as the pieces pass to
LiteLLM, and reads each ``messageStop`` event. A stream it cannot decode, which
LiteLLM fails on too, is no longer read. Claude called through
``InvokeModelWithResponseStream`` (``bedrock/invoke/``) streams Anthropic's own
events inside the same encoding, each base64-encoded in a ``chunk`` event; its
``model_context_window_exceeded`` is read as on Anthropic's API
(``anthropic_stop``).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

import httpx

from dex_agents.adapters.litellm.anthropic_stop import stops_for_the_context_window
from dex_agents.adapters.litellm.aws_event_stream import EventStreamDecoder
from dex_agents.adapters.litellm.bedrock_answered import BedrockErrorWatch
from dex_agents.adapters.litellm.errors import EventStreamFormatError

CONTEXT_WINDOW_STOP: Final = "model_context_window_exceeded"
"""Bedrock's stop reason for an answer that filled the model's context window."""

FAILED_BEDROCK_STOP_REASONS: Final = frozenset({"malformed_model_output", "malformed_tool_use"})
"""Bedrock's stop reasons for an answer or a tool call the model failed to make
(output that does not parse, a tool call whose input is no valid JSON). Another
sample of the same request may succeed."""


class BedrockStreamWatch(BedrockErrorWatch):
    """What the body of one Bedrock call said: a JSON error, or why the event stream stopped."""

    def __init__(self) -> None:
        super().__init__()
        self._decoder: EventStreamDecoder | None = None
        self.stop_reason: str | None = None
        """The ``stopReason`` of the stream's ``messageStop`` event, as Bedrock sent it."""

    def sees(self, response: httpx.Response) -> bool:
        """Read a JSON body as ``BedrockErrorWatch`` does, and the event stream in binary."""
        if super().sees(response):
            return True
        self.binary = True
        self._decoder = EventStreamDecoder()
        return True

    def read_bytes(self, piece: bytes) -> None:
        """Decode the messages ``piece`` completes, and read each ``messageStop`` event."""
        if self._decoder is None:
            return
        try:
            messages = self._decoder.feed(piece)
        except EventStreamFormatError:
            self._decoder = None  # LiteLLM's decoder fails on it as well, and says so
            return
        for message in messages:
            if message.header(":message-type") != "event":
                continue
            kind = message.header(":event-type")
            if kind == "messageStop":
                self._read_converse_stop(message.payload)
            elif kind == "chunk" and _invoked_model_stops_for_the_context_window(message.payload):
                self.finish_reason = "length"

    def _read_converse_stop(self, payload: bytes) -> None:
        try:
            event: Any = json.loads(payload)
        except ValueError:
            return
        reason = event.get("stopReason") if isinstance(event, dict) else None
        if isinstance(reason, str) and reason:
            self._read_stop(reason)

    def _read_stop(self, reason: str) -> None:
        self.stop_reason = reason
        if reason == CONTEXT_WINDOW_STOP:
            self.finish_reason = "length"
        elif reason in FAILED_BEDROCK_STOP_REASONS:
            self.failed_reason = reason


def _invoked_model_stops_for_the_context_window(payload: bytes) -> bool:
    """Whether an ``InvokeModelWithResponseStream`` chunk is Claude's stop for its context window.

    The chunk holds the model's own event, base64-encoded (``{"bytes": ...}``):
    for Claude, Anthropic's ``message_delta``, whose ``stop_reason`` LiteLLM
    reads as Anthropic's API sends it.
    """
    try:
        chunk: Any = json.loads(payload)
        data = chunk.get("bytes") if isinstance(chunk, dict) else None
        event = base64.b64decode(data, validate=True) if isinstance(data, str) else b""
    except (ValueError, binascii.Error):
        return False
    return stops_for_the_context_window(event)
