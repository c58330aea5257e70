"""Session settings: one JSON object per session that its turns' model calls read.

The compact JSON text of the settings, UTF-8 with non-ASCII unescaped, is at most
``MAX_SESSION_SETTINGS_BYTES``. Other cores write some floats and U+2028/U+2029
differently, so the session's own checks accept
``SESSION_SETTINGS_SIZE_TOLERANCE_BYTES`` more ("Session settings"). A running
turn reads only its ``TurnSessionSettings`` copy; a copy that an earlier turn left
reads as no settings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from dex_agents.domain.state import TurnSessionSettings

MAX_SESSION_SETTINGS_BYTES = 16 * 1024
"""The largest compact UTF-8 JSON text of session settings: 16 KiB."""

SESSION_SETTINGS_SIZE_TOLERANCE_BYTES = 1024
"""How many bytes more than ``MAX_SESSION_SETTINGS_BYTES`` the session's own checks accept."""

MAX_SESSION_SETTINGS_DEPTH = 256
"""The deepest nesting of objects and arrays session settings may have.

The wire converters recurse once per level, and settings nested about 325 deep
raised a bare ``RecursionError`` from them after passing every check here.
"""

INVALID_START_SESSION_SETTINGS_REASON = "invalid start session settings"
"""The start of the reason with which ``StartAgentSession`` fails a session at once."""

_ENTER, _EXIT = 0, 1

# A path is a linked list (parent, step), rendered only for an error message, so a
# deeply nested value costs no quadratic string building.
_Path = tuple["_Path", str | int] | None


def _render(path: _Path) -> str:
    steps: list[str] = []
    while path is not None:
        path, step = path
        steps.append(f"[{step!r}]" if isinstance(step, str) else f"[{step}]")
    return "session settings" + "".join(reversed(steps))


def _check_json_object(settings: object) -> None:
    """Raise ``ValueError`` naming the first part of ``settings`` that is not JSON."""
    if not isinstance(settings, Mapping):
        raise ValueError(
            "session settings must be a JSON object (a mapping with string keys), "
            f"not {type(settings).__name__}"
        )
    # Iterative, so deep nesting gives a clear error later rather than a RecursionError here.
    stack: list[tuple[int, object, _Path]] = [(_ENTER, settings, None)]
    open_containers: set[int] = set()
    while stack:
        action, value, path = stack.pop()
        if action == _EXIT:
            open_containers.discard(id(value))
            continue
        if value is None or isinstance(value, str | bool | int):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{_render(path)} is {value!r}, which JSON cannot hold")
            continue
        if not isinstance(value, Mapping | list | tuple):
            raise ValueError(
                f"{_render(path)} is of type {type(value).__name__}, which is not a JSON value"
            )
        if id(value) in open_containers:
            raise ValueError(f"{_render(path)} contains itself")
        # The open containers are this one's ancestors: their count is its depth.
        if len(open_containers) >= MAX_SESSION_SETTINGS_DEPTH:
            raise ValueError(
                f"session settings are nested more than {MAX_SESSION_SETTINGS_DEPTH} levels deep"
            )
        open_containers.add(id(value))
        stack.append((_EXIT, value, path))
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValueError(
                        f"{_render(path)} has the key {key!r} of type {type(key).__name__}; "
                        "JSON object keys must be strings"
                    )
                stack.append((_ENTER, item, (path, key)))
        else:
            for index, item in enumerate(value):
                stack.append((_ENTER, item, (path, index)))


def _plain(value: object) -> Any:
    # json.dumps writes only dicts as objects; other Mappings reach this hook.
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a {type(value).__name__} is not a JSON value")


def session_settings_size(settings: Mapping[str, Any]) -> int:
    """The size in bytes of the settings' compact JSON text, UTF-8 with non-ASCII unescaped.

    Raises ``ValueError`` naming the problem for settings that are not a JSON
    object: a value that is not a mapping with string keys, or that holds
    something JSON cannot (NaN or infinity, a set, bytes, a lone surrogate).
    """
    _check_json_object(settings)
    try:
        text = json.dumps(
            settings, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_plain
        )
    except ValueError as error:
        # Python refuses to write an int of more than 4,300 digits, say.
        raise ValueError(f"session settings cannot be written as JSON: {error}") from None
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(
            "session settings hold text that is not valid Unicode (a lone surrogate)"
        ) from None


def _check_size(settings: Mapping[str, Any], limit: int, limit_name: str) -> None:
    size = session_settings_size(settings)
    if size > limit:
        raise ValueError(
            f"session settings are {size} bytes of JSON, more than {limit} ({limit_name})"
        )


def validate_session_settings(settings: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the problem unless ``settings`` are valid session settings.

    Valid settings are a JSON object whose compact JSON text is at most
    ``MAX_SESSION_SETTINGS_BYTES``. ``AgentSessionClient`` checks this before it sends.
    """
    _check_size(settings, MAX_SESSION_SETTINGS_BYTES, "MAX_SESSION_SETTINGS_BYTES")


def _check_with_tolerance(settings: Mapping[str, Any]) -> None:
    _check_size(
        settings,
        MAX_SESSION_SETTINGS_BYTES + SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
        "MAX_SESSION_SETTINGS_BYTES + SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
    )


def accepts_session_settings_update(settings: Mapping[str, Any] | None) -> bool:
    """Whether ``update_session_settings`` may store ``settings``, by the session's own check.

    ``False`` for ``None``, for settings that are not a JSON object, and for text
    larger than ``MAX_SESSION_SETTINGS_BYTES + SESSION_SETTINGS_SIZE_TOLERANCE_BYTES``.
    """
    if settings is None:
        return False
    try:
        _check_with_tolerance(settings)
    except ValueError:
        return False
    return True


def invalid_start_session_settings_reason(problem: str) -> str:
    """The failure reason of a session whose start settings are invalid."""
    return f"{INVALID_START_SESSION_SETTINGS_REASON}: {problem}"


def start_session_settings_failure(settings: Mapping[str, Any] | None) -> str | None:
    """The reason ``StartAgentSession`` fails the session with, or ``None`` when the settings fit.

    ``None`` settings are no settings. Other settings must pass the session's own
    check, with the tolerance; the reason starts with ``INVALID_START_SESSION_SETTINGS_REASON``.
    """
    if settings is None:
        return None
    try:
        _check_with_tolerance(settings)
    except ValueError as error:
        return invalid_start_session_settings_reason(str(error))
    return None


def copy_settings_for_turn(settings: Mapping[str, Any] | None, turn_id: str) -> TurnSessionSettings:
    """The ``TurnSessionSettings`` copy that the Step starting turn ``turn_id`` writes."""
    return TurnSessionSettings(turn_id=turn_id, settings=dict(settings or {}))


def read_turn_settings(copy: TurnSessionSettings | None, turn_id: str) -> Mapping[str, Any]:
    """The settings that turn ``turn_id`` runs with: its copy's, else an empty mapping.

    A copy that another turn left, or no copy, reads as no settings.
    """
    if copy is None or copy.turn_id != turn_id:
        return {}
    return copy.settings
