"""A Bedrock error answered with HTTP 200: a JSON error body in place of the event stream.

Bedrock answers its errors with an HTTP status, a JSON body
(``{"message": ...}``, ``{"Message": ...}``) and the error's kind in the
``x-amzn-ErrorType`` header (or the body's ``__type``); a gateway in front of
it may send the same with HTTP 200. LiteLLM (1.105) then reads the JSON as the
AWS event stream encoding, and the call failed with a retryable "Checksum
mismatch", the provider's words and its retry rule lost. For a Bedrock model's
call the client hands LiteLLM the watched HTTP client (``body_watch``); a
``BedrockErrorWatch`` reads such a body, and leaves the event stream, which
is not text, to pass untouched.
"""

from __future__ import annotations

import json
from typing import Any, Final

import httpx

from dex_agents.adapters.litellm.answered_errors import AnsweredError, answered_error
from dex_agents.adapters.litellm.body_watch import BodyWatch

EVENT_STREAM: Final = "application/vnd.amazon.eventstream"
"""The content type of Bedrock's stream, binary frames this watch does not read
(``BedrockStreamWatch``, ``bedrock_stop``, reads their stop reason)."""

_MESSAGE_LIMIT: Final = 2000


def bedrock_kind(value: object) -> str | None:
    """The error kind ``value`` names (``ThrottlingException``), without its namespace or URL."""
    if not isinstance(value, str):
        return None
    kind = value.split(":", 1)[0].rsplit("#", 1)[-1].strip()
    return kind or None


class BedrockErrorWatch(BodyWatch):
    """What the body of one Bedrock call said: the error a JSON body answered in place of a stream."""

    reads_body_as_it_comes = True

    def __init__(self) -> None:
        super().__init__()
        self._header_kind: str | None = None

    def sees(self, response: httpx.Response) -> bool:
        """Keep the header's error kind; the event stream is binary, so it is not read."""
        self._header_kind = bedrock_kind(response.headers.get("x-amzn-errortype"))
        content_type: str = response.headers.get("content-type", "")
        return content_type.split(";", 1)[0].strip().lower() != EVENT_STREAM

    def read_line(self, line: bytes) -> bytes:
        """Pass ``line`` on: Bedrock's errors come in a whole body, read by ``read_body``."""
        return line

    def read_body(self, body: bytes) -> None:
        """Read a JSON error body: Bedrock's own shape, or the shape of an OpenAI-style gateway."""
        try:
            data: Any = json.loads(body)
        except ValueError:
            return
        if self.error is not None or not isinstance(data, dict):
            return
        if "error" in data:
            self.error = answered_error(data, in_stream=False)
            return
        message = next(
            (
                value.strip()
                for value in (data.get("message"), data.get("Message"))
                if isinstance(value, str) and value.strip()
            ),
            None,
        )
        kind = bedrock_kind(data.get("__type")) or self._header_kind
        if message is None and kind is None:
            return
        message = message or str(kind)
        if len(message) > _MESSAGE_LIMIT:
            message = message[:_MESSAGE_LIMIT] + "..."
        kinds = () if kind is None else (kind,)
        self.error = AnsweredError(message=message, kinds=kinds, status=None, in_stream=False)
