"""Credentials never reach a repr or an error text."""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
)
from dex_agents.domain.secrets import REDACTED, names_a_credential, redact_secrets

KEY = "sk-very-secret-0123456789"


@pytest.mark.parametrize(
    ("key", "credential"),
    [
        ("api_key", True),
        ("OPENAI_API_KEY", True),
        ("aws_secret_access_key", True),
        ("Authorization", True),
        ("x-api-key", True),
        ("refresh_token", True),
        ("password", True),
        ("temperature", False),
        ("thinking", False),
        ("max_tokens", True),  # "token" in the name: redacting a number is harmless
        (3, False),
    ],
)
def test_names_a_credential(key: object, credential: bool) -> None:
    assert names_a_credential(key) is credential


def test_redact_secrets_at_any_depth_and_nothing_else() -> None:
    settings: dict[str, Any] = {
        "api_key": KEY,
        "temperature": 0.2,
        "extra_headers": {"Authorization": f"Bearer {KEY}", "X-Trace": "t-1"},
        "fallbacks": [{"model": "b", "api_key": KEY}],
    }
    assert redact_secrets(settings) == {
        "api_key": REDACTED,
        "temperature": 0.2,
        "extra_headers": {"Authorization": REDACTED, "X-Trace": "t-1"},
        "fallbacks": [{"model": "b", "api_key": REDACTED}],
    }
    assert settings["api_key"] == KEY  # the original is untouched


def test_repr_of_a_definition_and_a_request_shows_no_key() -> None:
    model = ScriptedModelClient(lambda _: ScriptedModelReply(text="hi"))
    definition = AgentDefinition(
        name="a", instructions="x", model=model, model_settings={"api_key": KEY}
    )
    request = ModelRequest(instructions="x", items=(), settings={"api_key": KEY})
    assert KEY not in repr(definition)
    assert KEY not in repr(request)


class _NoForcedChoice(ScriptedModelClient):
    def supports_forced_tool_choice(self, settings: Any) -> bool:
        return False


def test_the_forced_tool_choice_error_shows_no_key() -> None:
    model = _NoForcedChoice(lambda _: ScriptedModelReply(text="hi"))
    with pytest.raises(ValueError, match="forced tool choice") as raised:
        AgentDefinition(
            name="a",
            instructions="x",
            model=model,
            model_settings={"api_key": KEY, "thinking": {"type": "enabled"}},
            planning_tool_choice="required",
        )
    assert KEY not in str(raised.value)
    assert REDACTED in str(raised.value)
