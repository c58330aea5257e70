"""A Vertex AI access token for LiteLLM's Vertex AI routes, offline.

LiteLLM gets a Vertex AI token through ``google-auth``, which is not installed
here (users of Vertex AI install it). ``vertex_token`` gives LiteLLM's partner
model route (Claude on Vertex AI) a credential as ``google-auth`` would leave
it, a fresh token for ``PROJECT``, in the cache LiteLLM reads before it would
load one, so the request goes to the provider on loopback with
``Authorization: Bearer TOKEN``. LiteLLM's Gemini route reads that cache only
through ``google-auth``'s token states, so ``vertex_gemini_token`` stands in for
the step that asks ``google-auth`` for the token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import pytest
from litellm import main as litellm_main

PROJECT = "support-project"
LOCATION = "us-east5"
TOKEN = "ya29.vertex-test-token"


@attrs.frozen
class _FreshCredentials:
    """What LiteLLM reads of a ``google.auth`` credential: a token that has not expired."""

    token: str = TOKEN
    expired: bool = False
    quota_project_id: str = PROJECT


@contextmanager
def vertex_token(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """LiteLLM's partner model route holds a fresh token for ``PROJECT`` while in the block."""
    # LiteLLM reads these before its cache; the cache's key holds no credentials.
    for name in ("VERTEXAI_CREDENTIALS", "VERTEX_AI_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    # Typed for google-auth's credentials, which _FreshCredentials stands in for.
    cache: dict[Any, Any] = (
        litellm_main.vertex_partner_models_chat_completion._credentials_project_mapping
    )
    key = (None, PROJECT)
    cache[key] = (_FreshCredentials(), PROJECT)
    try:
        yield
    finally:
        cache.pop(key, None)


def vertex_gemini_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM's Gemini route on Vertex AI gets ``TOKEN`` for the project, for the test."""

    async def fresh_token(credentials: object, project_id: str | None) -> tuple[str, str]:
        return TOKEN, project_id or PROJECT

    monkeypatch.setattr(litellm_main.vertex_chat_completion, "get_access_token_async", fresh_token)


def vertex_options() -> dict[str, str]:
    """The request options that name the project and region of a Vertex AI call."""
    return {"vertex_project": PROJECT, "vertex_location": LOCATION}
