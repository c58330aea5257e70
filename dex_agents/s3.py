"""Image bytes in an S3-compatible bucket (``dex_agents.s3``; install ``dex-agents[s3]``).

``S3MediaStore`` is a ``MediaStore`` that keeps each image as one object, keyed by its
SHA-256, in AWS S3 or any S3-compatible service; see the design's "Images".
"""

from __future__ import annotations

try:
    import aiobotocore  # type: ignore[import-untyped]  # noqa: F401  (only to name the extra)
except ImportError as error:
    raise ImportError(
        'dex_agents.s3 needs aiobotocore: install it with pip install "dex-agents[s3]"',
        name=__name__,
    ) from error

from dex_agents.adapters.media.s3_store import S3MediaStore

__all__ = ["S3MediaStore"]
