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
LiteLLM fails on too, is no longer read.
"""

from __future__ import annotations

import json
from typing import Any, Final

import httpx

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
            if message.header(":event-type") != "messageStop":
                continue
            try:
                event: Any = json.loads(message.payload)
            except ValueError:
                continue
            reason = event.get("stopReason") if isinstance(event, dict) else None
            if isinstance(reason, str) and reason:
                self._read_stop(reason)

    def _read_stop(self, reason: str) -> None:
        self.stop_reason = reason
        if reason == CONTEXT_WINDOW_STOP:
            self.finish_reason = "length"
        elif reason in FAILED_BEDROCK_STOP_REASONS:
            self.failed_reason = reason
