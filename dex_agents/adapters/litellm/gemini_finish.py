"""Whether Gemini finished a streamed answer, read off the stream's HTTP body.

Gemini names why an answer ended (``finishReason``) in its last chunk; a
stream that ends without one was cut. LiteLLM (1.105) maps a chunk without one
to ``"stop"`` and keeps neither the raw chunk nor the provider's value on its
chunks or stream wrapper, so a Gemini stream that ended cleanly mid-answer read
as a whole answer. Its parser is no stable place to look; Gemini's wire format
is. For a Gemini model's Chat Completions call the client hands LiteLLM the
watched HTTP client (``body_watch``), which LiteLLM uses for the stream's
request, and a ``GeminiFinishWatch`` reads each ``data:`` line of the body as
LiteLLM reads it.

The watch also mends what LiteLLM (1.105) cannot read: a ``functionCall``
without ``args``, which Gemini's API makes optional (a call of a function that
takes no parameters) and LiteLLM's parser needs, gets ``"args": {}``, what the
missing field means, before LiteLLM reads the line.

It keeps, too, a finish reason that says the model failed to make its answer
(``FAILED_GEMINI_FINISH_REASONS``): LiteLLM maps ``MALFORMED_FUNCTION_CALL``
and ``UNEXPECTED_TOOL_CALL`` to ``"stop"``, and Gemini sends no content with
them, so the answer read as an empty one that ended the turn.
"""

from __future__ import annotations

from typing import Any, Final

from dex_agents.adapters.litellm.body_watch import BodyWatch

FAILED_GEMINI_FINISH_REASONS: Final = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
"""Gemini's finish reasons for a tool call the model failed to make: a call that is
not valid code, or one of a function the request did not declare. Another sample
of the same request may succeed."""


class GeminiFinishWatch(BodyWatch):
    """What the body of one Gemini stream said: whether it came, and whether Gemini ended it."""

    reads_every_chunk = True

    def __init__(self) -> None:
        super().__init__()
        self.finished = False
        """A chunk named a ``finishReason``, or Gemini blocked the prompt (``blockReason``).

        A finish reason of ``FAILED_GEMINI_FINISH_REASONS`` is kept as ``failed_reason``,
        with its ``finishMessage`` when Gemini sent one."""

    def read_chunk(self, chunk: dict[str, Any]) -> bool:
        """Read one chunk: whether it ends the answer; mend its calls (``mend_function_calls``)."""
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.finished = True  # no answer at all: LiteLLM reads it as filtered
        for candidate in chunk.get("candidates") or ():
            if isinstance(candidate, dict) and candidate.get("finishReason"):
                self.finished = True
                reason = candidate["finishReason"]
                if reason in FAILED_GEMINI_FINISH_REASONS:
                    message = candidate.get("finishMessage")
                    self.failed_reason = (
                        f"{reason}: {message}" if isinstance(message, str) and message else reason
                    )
        return mend_function_calls(chunk)

    @property
    def cut(self) -> bool:
        """Whether a watched stream ended without Gemini ending the answer."""
        return self.watched and not self.finished


def mend_function_calls(chunk: dict[str, Any]) -> bool:
    """Give each ``functionCall`` of ``chunk`` without ``args`` an empty ``args``; whether one had none.

    Gemini's API makes ``args`` optional; LiteLLM (1.105) raises ``KeyError``
    for a call without it, on every retry alike.
    """
    mended = False
    for candidate in chunk.get("candidates") or ():
        content = candidate.get("content") if isinstance(candidate, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            call = part.get("functionCall") if isinstance(part, dict) else None
            if isinstance(call, dict) and "args" not in call:
                call["args"] = {}
                mended = True
    return mended
