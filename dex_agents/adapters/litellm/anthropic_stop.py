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


def stops_for_the_context_window(data: bytes) -> bool:
    """Whether the JSON event ``data`` is a ``message_delta`` that stops for ``CONTEXT_WINDOW_STOP``.

    Anything that is no such event, JSON or not, is not.
    """
    if CONTEXT_WINDOW_STOP.encode() not in data:
        return False  # LiteLLM parses each event too: a second parse only where it may tell
    try:
        event: Any = json.loads(data)
    except ValueError:
        return False
    delta = event.get("delta") if isinstance(event, dict) else None
    return (
        isinstance(delta, dict)
        and event.get("type") == "message_delta"
        and delta.get("stop_reason") == CONTEXT_WINDOW_STOP
    )


class AnthropicStopWatch(BodyWatch):
    """What the body of one Anthropic stream said, and whether the context window stopped it."""

    def read_line(self, line: bytes) -> bytes:
        """Read one line as ``BodyWatch`` does, and the stop reason of a ``message_delta``.

        A ``message_delta`` that stops the answer with ``CONTEXT_WINDOW_STOP`` sets
        ``finish_reason`` to ``"length"``.
        """
        if line.startswith(b"data:") and stops_for_the_context_window(line[5:]):
            self.finish_reason = "length"
        return super().read_line(line)
