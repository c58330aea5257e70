"""Bedrock's ``modelStreamErrorException``: an error the model sent inside Bedrock's stream.

Bedrock's documentation says to retry it ("An error occurred while streaming
the response. Retry your request."), and LiteLLM (1.105) files it under the
event's modeled HTTP status, 424, which no retry would pass, though no HTTP
answer had that status. The event names the model's own status and message
(``originalStatusCode``, ``originalMessage``): a 4xx there that a retry cannot
pass (a 400) is the model refusing the request itself, which every retry sends
again, and the model's message says why where Bedrock's does not.
"""

from __future__ import annotations

import json
from typing import Any, Final

import attrs

MODEL_STREAM_ERROR: Final = "modelStreamErrorException"
"""The ``:exception-type`` of the event, which LiteLLM puts first in its error's text."""


@attrs.frozen(kw_only=True)
class ModelStreamError:
    """What a ``modelStreamErrorException`` says: the model's status, if named, and why."""

    original_status: int | None
    message: str
    """The model's message (``originalMessage``) when the event has one, else Bedrock's."""


def model_stream_error(text: str) -> ModelStreamError | None:
    """The ``modelStreamErrorException`` that LiteLLM's error ``text`` holds, or ``None``.

    LiteLLM writes the event as its type, a space, and the event's JSON body.
    """
    kind, _, body = text.strip().partition(" ")
    if kind != MODEL_STREAM_ERROR:
        return None
    data: Any
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return ModelStreamError(original_status=None, message=body.strip() or kind)
    status = data.get("originalStatusCode")
    if isinstance(status, bool) or not isinstance(status, int):
        status = None
    message = next(
        (
            value.strip()
            for value in (data.get("originalMessage"), data.get("message"))
            if isinstance(value, str) and value.strip()
        ),
        kind,
    )
    if status is not None:
        message = f"the model answered {status}: {message}"
    return ModelStreamError(original_status=status, message=message)
