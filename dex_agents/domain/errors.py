"""Errors of the domain layer.

::

    DexAgentsError
    ├── ToolExecutionError        a tool failed; the model reads the message
    ├── ToolOutcomeUnknownError   a write was sent and its outcome is unknown
    ├── ImageValidationError      bytes or a reference that is not a valid image
    ├── MediaStoreError           a media store could not store or read an image
    └── WireFormatError           a wire value that does not decode to its type

``ImageValidationError`` and ``WireFormatError`` are also ``ValueError``\\ s, because
they report bad input. None of these is retryable by itself: a tool Step's retry
policy, not the error, decides whether an attempt runs again.
"""

from __future__ import annotations


class DexAgentsError(Exception):
    """Base class of every error that dex-agents raises on purpose."""


class ToolExecutionError(DexAgentsError):
    """A tool call failed in a way the model should see.

    The session records the call ``failed`` with this message and does not retry it.
    """


class ToolOutcomeUnknownError(DexAgentsError):
    """A tool sent a write and cannot tell whether it took effect.

    The session records the call ``outcome_unknown`` and never sends it again.
    """


class ImageValidationError(DexAgentsError, ValueError):
    """Bytes that are not a supported, well-formed image, or an invalid image reference."""


class MediaStoreError(DexAgentsError):
    """A media store could not store or read an image."""


class WireFormatError(DexAgentsError, ValueError):
    """A wire value (JSON text or a decoded JSON value) that does not match its type."""
