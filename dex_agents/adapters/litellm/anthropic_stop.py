"""Why Anthropic stopped a streamed answer, where LiteLLM does not keep it.

Claude (Sonnet 4.5 and later) stops an answer that filled the context window
with ``stop_reason`` ``model_context_window_exceeded``. LiteLLM (1.105) does not
know the reason and maps it to ``"stop"``, so an answer the window cut read as
a whole one: without text, an empty answer that ended the turn. The client
reads the reason off the stream's body (``body_watch``) and reports the answer
as cut at its limit, ``"length"``, as LiteLLM reports ``max_tokens``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from dex_agents.adapters.litellm.body_watch import BodyWatch

CONTEXT_WINDOW_STOP: Final = "model_context_window_exceeded"
"""Anthropic's stop reason for an answer that filled the model's context window."""


class AnthropicStopWatch(BodyWatch):
    """What the body of one Anthropic stream said, and whether the context window stopped it."""

    def read_line(self, line: bytes) -> bytes:
        """Read one line as ``BodyWatch`` does, and the stop reason of a ``message_delta``.

        A ``message_delta`` that stops the answer with ``CONTEXT_WINDOW_STOP`` sets
        ``finish_reason`` to ``"length"``.
        """
        if line.startswith(b"data:") and CONTEXT_WINDOW_STOP.encode() in line:
            try:
                event: Any = json.loads(line[5:])
            except ValueError:
                event = None
            # Only an object is an event: a line of other JSON, or none, passes on unread.
            delta = event.get("delta") if isinstance(event, dict) else None
            if (
                isinstance(delta, dict)
                and event.get("type") == "message_delta"
                and delta.get("stop_reason") == CONTEXT_WINDOW_STOP
            ):
                self.finish_reason = "length"
        return super().read_line(line)
