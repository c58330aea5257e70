"""Errors of the domain layer.

::

    DexAgentsError
    ├── ToolExecutionError        a tool failed; the model reads the message
    ├── ToolOutcomeUnknownError   a write was sent and its outcome is unknown
    ├── ImageValidationError      bytes or a reference that is not a valid image
    ├── MediaStoreError           a media store could not store or read an image
    ├── WireFormatError           a wire value that does not decode to its type
    └── InvalidSessionIdError     a session ID that breaks the session ID rule

``ImageValidationError``, ``WireFormatError`` and ``InvalidSessionIdError`` are
also ``ValueError``\\ s, because they report bad input. An argument of the wrong
type is a plain ``TypeError`` (see ``dex_agents.domain.arguments``): a mistake in
the calling code, not something dex-agents reports about a value.

None of these is retryable by itself: a tool Step's retry policy, not the
error, decides whether an attempt runs again.
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


class InvalidSessionIdError(DexAgentsError, ValueError):
    """A session ID that ``validate_session_id`` refuses; the message names the fault.

    A web route that takes the session ID from its path can answer 400 for it.
    """
