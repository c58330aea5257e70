"""Runner of ``conformance/session_settings_sizes.json``: the size and validity of session settings."""

from __future__ import annotations

from typing import Any

from dex_agents.domain.session_settings import (
    accepts_session_settings_update,
    session_settings_size,
    start_session_settings_failure,
    validate_session_settings,
)

RULE = "session_settings_sizes"


def _settings(case_input: dict[str, Any]) -> Any:
    settings = case_input["settings"]
    fill = case_input.get("fill")
    if fill is None:
        return settings
    text = "".join(part * count for part, count in fill["parts"])
    return {**settings, fill["key"]: text}


def run(case_input: dict[str, Any]) -> Any:
    """Return the size, strict validity, update acceptance and start failure of the settings."""
    settings = _settings(case_input)
    try:
        size: int | None = session_settings_size(settings)
    except ValueError:
        size = None
    try:
        validate_session_settings(settings)
    except ValueError:
        valid = False
    else:
        valid = True
    return {
        "size": size,
        "valid": valid,
        "accepted_by_update": accepts_session_settings_update(settings),
        "start_fails": start_session_settings_failure(settings) is not None,
    }
