"""The provider's own words in a LiteLLM error, and the text a failed model call shows.

LiteLLM wraps what the provider answered in its own prefixes
(``litellm.BadRequestError: AnthropicException - ``) and often in a Python
``bytes`` literal of the JSON error body; ``provider_message`` finds the
provider's ``error.message`` in it, and ``describe_failure`` builds the
``<provider> model call failed ...`` text around it.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Final

# LiteLLM names the provider "AnthropicException - " or, for an error that came
# inside a stream, "AnthropicError - ", and some errors by provider and kind
# ("Vertex_ai_betaException BadRequestError - ", "AzureException BadRequestError - ").
_LITELLM_PREFIX: Final = re.compile(
    r"^(?:litellm\.\w+:\s*|\w+Error:\s*|\w+(?:Exception|Error)(?:\s+\w+Error)?\s+-\s+)+"
)
# LiteLLM ends a chunk's error with the chunk's repr ("... Received Chunk={'text': ...}").
_CHUNK_DUMP: Final = re.compile(r"\.?\s*Received Chunk=.*", re.DOTALL)
_BYTES_LITERAL: Final = re.compile(r"""b(['"]).*\1""", re.DOTALL)
_MESSAGE_LIMIT: Final = 2000


def _json_message(data: object) -> str | None:
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    for value in (error, data.get("message"), data.get("detail")):
        if isinstance(value, str) and value:
            return value
    return None


def _embedded_json(text: str) -> object:
    literal = _BYTES_LITERAL.search(text)
    if literal is not None:
        try:
            value = ast.literal_eval(literal.group(0))
            if isinstance(value, bytes):
                return json.loads(value.decode("utf-8", "replace"))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            return decoder.raw_decode(text, start)[0]
        except ValueError:
            start = text.find("{", start + 1)
    return None


def provider_message(text: str) -> str:
    """The provider's own message inside a LiteLLM error text.

    The ``error.message`` of a JSON error body when the text holds one, else the
    text without LiteLLM's ``litellm.<Name>Error:`` and ``<Provider>Exception -`` prefixes
    and without the chunk LiteLLM appends to an error a chunk named.
    """
    text = _CHUNK_DUMP.sub("", text)
    message = _json_message(_embedded_json(text)) or _LITELLM_PREFIX.sub("", text.strip())
    message = message.strip() or text.strip()
    if len(message) > _MESSAGE_LIMIT:
        message = message[:_MESSAGE_LIMIT] + "..."
    return message


def describe_failure(provider: str, status_code: int | None, message: str) -> str:
    """``<provider> model call failed with HTTP <status>: <message>``, or without the status."""
    if status_code is None:
        return f"{provider} model call failed: {message}"
    return f"{provider} model call failed with HTTP {status_code}: {message}"
