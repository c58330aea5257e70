"""Runs the ``image_detection`` cases: structural image detection and the file URI rule.

``input["operation"]`` names the public rule a case calls:

- ``detect_image_mime_type``: ``data_base64`` is the bytes; the result is the MIME
  type or ``None``.
- ``encode_file_uri_path``: ``path`` is the text, or ``path_bytes_base64`` the raw
  POSIX bytes (decoded with ``surrogateescape``); the result is the encoded path.
- ``local_directory_store_uri``: ``root`` and ``sha256``; the result is
  ``{"store_uri", "image_uri"}``, or ``{"error": "ValueError"}`` for a refused root.
"""

from __future__ import annotations

import base64
from typing import Any

from dex_agents.domain.images import (
    detect_image_mime_type,
    encode_file_uri_path,
    image_uri,
    local_directory_store_uri,
)

RULE = "image_detection"


def run(case_input: dict[str, Any]) -> Any:
    """Apply the case's rule to its input and return the plain JSON result."""
    operation = case_input["operation"]
    if operation == "detect_image_mime_type":
        return detect_image_mime_type(base64.b64decode(case_input["data_base64"], validate=True))
    if operation == "encode_file_uri_path":
        if "path_bytes_base64" in case_input:
            raw = base64.b64decode(case_input["path_bytes_base64"], validate=True)
            return encode_file_uri_path(raw.decode("utf-8", "surrogateescape"))
        return encode_file_uri_path(case_input["path"])
    if operation == "local_directory_store_uri":
        try:
            store_uri = local_directory_store_uri(case_input["root"])
        except ValueError:
            return {"error": "ValueError"}
        return {"store_uri": store_uri, "image_uri": image_uri(store_uri, case_input["sha256"])}
    raise ValueError(f"unknown image_detection operation {operation!r}")
