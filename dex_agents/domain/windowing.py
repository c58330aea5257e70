"""Message storage settings and keys: the window, chunk limits, and retention's limit.

The newest messages are the window, one ``AgentMessages`` instance per message
keyed by ``message_sequence_key(n)``. Older messages move into immutable
``AgentMessageChunks`` instances keyed by their first sequence. These are the
numbers that bound both, and the one validation every options type shares.
"""

from __future__ import annotations

from dataclasses import dataclass

MESSAGE_SEQUENCE_KEY_DIGITS = 12
"""Digits of a ``message_sequence_key``: zero-padded, so keys sort in sequence order."""

MAX_MESSAGE_SEQUENCE = 10**MESSAGE_SEQUENCE_KEY_DIGITS - 1
"""The largest sequence a 12-digit key can hold."""

DEFAULT_MESSAGE_WINDOW_SIZE = 64
"""``message_window_size``: messages the window holds before its oldest move into chunks."""

DEFAULT_MESSAGE_CHUNK_SIZE = 32
"""``message_chunk_size``: the most messages one chunk holds."""

DEFAULT_MESSAGE_CHUNK_MAX_BYTES = 1024 * 1024
"""``message_chunk_max_bytes``: the most encoded JSON one chunk holds (1 MiB)."""

MAX_MESSAGE_CHUNK_BYTES = 8 * 1024 * 1024
"""The largest ``message_chunk_max_bytes`` allowed (8 MiB)."""

MAX_CHUNKS_PER_COMMIT = 4
"""The most chunks one commit moves out of the window."""

MAX_CHUNK_BYTES_PER_COMMIT = 8 * 1024 * 1024
"""The most chunk bytes one commit moves out of the window (8 MiB)."""

DEFAULT_RETAINED_MESSAGE_LIMIT = 1_000
"""``retained_message_limit``: with compaction, the newest messages retention always keeps."""


def message_sequence_key(sequence: int) -> str:
    """The ``AgentMessages`` / ``AgentMessageChunks`` key of a sequence: 12-digit zero-padded decimal.

    Raises ``ValueError`` for a sequence below 1 or above 999,999,999,999.
    """
    if isinstance(sequence, bool) or not isinstance(sequence, int):
        raise TypeError(f"a message sequence must be an int, not {type(sequence).__name__}")
    if sequence < 1 or sequence > MAX_MESSAGE_SEQUENCE:
        raise ValueError(
            f"a message sequence must be between 1 and {MAX_MESSAGE_SEQUENCE}, not {sequence}"
        )
    return f"{sequence:0{MESSAGE_SEQUENCE_KEY_DIGITS}d}"


def parse_message_sequence_key(key: str) -> int:
    """The sequence of a ``message_sequence_key``; ``ValueError`` for any other text."""
    if (
        not isinstance(key, str)
        or len(key) != MESSAGE_SEQUENCE_KEY_DIGITS
        or not key.isascii()
        or not key.isdigit()
    ):
        raise ValueError(
            f"a message sequence key is {MESSAGE_SEQUENCE_KEY_DIGITS} decimal digits, not {key!r}"
        )
    sequence = int(key)
    if sequence < 1:
        raise ValueError(f"a message sequence key names a sequence from 1, not {key!r}")
    return sequence


def _require_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def validate_message_storage_options(
    *,
    message_window_size: int,
    message_chunk_size: int,
    message_chunk_max_bytes: int,
    retained_message_limit: int | None,
) -> None:
    """Check the storage options; raise ``ValueError`` (``TypeError`` for a non-int) naming the field.

    ``message_window_size`` and ``message_chunk_size`` are at least 1,
    ``message_chunk_max_bytes`` is 1 to ``MAX_MESSAGE_CHUNK_BYTES`` (8 MiB), and
    ``retained_message_limit`` is ``None`` (keep everything) or at least 1.
    """
    if _require_int("message_window_size", message_window_size) < 1:
        raise ValueError(f"message_window_size must be at least 1, not {message_window_size}")
    if _require_int("message_chunk_size", message_chunk_size) < 1:
        raise ValueError(f"message_chunk_size must be at least 1, not {message_chunk_size}")
    chunk_bytes = _require_int("message_chunk_max_bytes", message_chunk_max_bytes)
    if not 1 <= chunk_bytes <= MAX_MESSAGE_CHUNK_BYTES:
        raise ValueError(
            f"message_chunk_max_bytes must be between 1 and {MAX_MESSAGE_CHUNK_BYTES}"
            f" (8 MiB), not {message_chunk_max_bytes}"
        )
    if (
        retained_message_limit is not None
        and _require_int("retained_message_limit", retained_message_limit) < 1
    ):
        raise ValueError(
            f"retained_message_limit must be None or at least 1, not {retained_message_limit}"
        )


@dataclass(frozen=True, kw_only=True)
class MessageStorageOptions:
    """How a session stores its messages; the same fields as ``AgentSessionOptions``.

    ``retained_message_limit=None`` keeps every message. Built values are always
    valid: construction runs ``validate_message_storage_options``.
    """

    message_window_size: int = DEFAULT_MESSAGE_WINDOW_SIZE
    message_chunk_size: int = DEFAULT_MESSAGE_CHUNK_SIZE
    message_chunk_max_bytes: int = DEFAULT_MESSAGE_CHUNK_MAX_BYTES
    retained_message_limit: int | None = DEFAULT_RETAINED_MESSAGE_LIMIT

    def __post_init__(self) -> None:
        validate_message_storage_options(
            message_window_size=self.message_window_size,
            message_chunk_size=self.message_chunk_size,
            message_chunk_max_bytes=self.message_chunk_max_bytes,
            retained_message_limit=self.retained_message_limit,
        )
