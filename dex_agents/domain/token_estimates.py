"""Token estimates: three UTF-8 bytes per token, the rule every input estimate uses.

Compaction compares these estimates with ``CompactionPolicy``'s trigger, and a
summary request's prompt is cut to fit its budget by the same count, so the two
never disagree about what fits.
"""

from __future__ import annotations

import functools

UTF8_BYTES_PER_TOKEN = 3
"""``estimate_text_tokens`` counts three UTF-8 bytes per token, which errs high for English."""


def estimate_text_tokens(text: str) -> int:
    """Tokens of ``text`` at three UTF-8 bytes per token, rounding up.

    A lone surrogate (from a tool's result) counts as the three bytes it would take.
    """
    return -(-utf8_length(text) // UTF8_BYTES_PER_TOKEN)


def utf8_length(text: str) -> int:
    """The UTF-8 bytes of ``text``, a lone surrogate counting as the three it would take."""
    # Every model call estimates the whole conversation again, so short texts (most
    # messages) are remembered; long ones are measured anew, so the cache stays small.
    if len(text) <= _REMEMBERED_TEXT_LENGTH:
        return _remembered_utf8_len(text)
    return _encoded_len(text)


_REMEMBERED_TEXT_LENGTH = 8192


@functools.lru_cache(maxsize=8192)
def _remembered_utf8_len(text: str) -> int:
    return _encoded_len(text)


def _encoded_len(text: str) -> int:
    # surrogatepass: a tool's text may hold lone surrogates, which only estimates see raw.
    return len(text.encode("utf-8", "surrogatepass"))
