"""Image references: what session state holds for an image whose bytes live in a media store."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class AgentImageReference:
    """One image in a media store, keyed by the SHA-256 of its bytes.

    Its wire form is ``{"type": "image", "uri": ..., "mime_type": ..., "sha256": ...,
    "size_bytes": ...}``. Session state never holds image bytes, only references.
    """

    uri: str
    mime_type: str
    sha256: str
    size_bytes: int
