"""Session settings: the size rule, validation, the session's tolerance and the turn's copy."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings

from dex_agents.domain.session_settings import (
    INVALID_START_SESSION_SETTINGS_REASON,
    MAX_SESSION_SETTINGS_BYTES,
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    accepts_session_settings_update,
    copy_settings_for_turn,
    invalid_start_session_settings_reason,
    read_turn_settings,
    session_settings_size,
    start_session_settings_failure,
    validate_session_settings,
)
from dex_agents.domain.state import TurnSessionSettings
from dex_agents.domain.wire import to_wire
from tests.support.wire_strategies import JSON_OBJECTS

# '{"k":""}' is 8 bytes, so a text of n bytes makes settings of n + 8 bytes.
_FRAME = len('{"k":""}')


def _settings_of(size: int, unit: str = "a") -> dict[str, str]:
    """Settings whose compact JSON is ``size`` bytes, made of ``unit`` characters plus ASCII."""
    unit_bytes = len(unit.encode("utf-8"))
    count, rest = divmod(size - _FRAME, unit_bytes)
    return {"k": unit * count + "a" * rest}


def test_constants() -> None:
    assert MAX_SESSION_SETTINGS_BYTES == 16384
    assert SESSION_SETTINGS_SIZE_TOLERANCE_BYTES == 1024
    assert INVALID_START_SESSION_SETTINGS_REASON == "invalid start session settings"


@pytest.mark.parametrize(
    ("settings", "size"),
    [
        ({}, 2),
        ({"model": "openai/gpt-5"}, 24),
        ({"a": 1, "b": [1, 2]}, 17),
        ({"a": None, "b": True, "c": False}, 29),
        ({"name": "grüße"}, 18),
        ({"e": "€"}, 11),
        ({"face": "😀"}, 15),
        ({"ls": "\u2028", "ps": "\u2029"}, 23),
        ({"q": 'say "hi"\n'}, 20),
        ({"ctl": "\x01"}, 16),
        ({"f": 0.5, "g": -2.25, "h": 1.0}, 27),
        ({"outer": {"inner": {"deep": [1, {"x": "y"}]}}}, 42),
        ({"t": (1, 2)}, 11),
        (MappingProxyType({"a": MappingProxyType({"b": 1})}), 13),
    ],
)
def test_size_is_the_compact_utf8_json_text(settings: Mapping[str, Any], size: int) -> None:
    assert session_settings_size(settings) == size


@settings(max_examples=100, deadline=None)
@given(value=JSON_OBJECTS)
def test_size_matches_a_compact_encoding_in_any_key_order(value: dict[str, Any]) -> None:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert session_settings_size(value) == len(text.encode("utf-8"))


@pytest.mark.parametrize("unit", ["a", "é", "€", "😀", "\u2028"])
@pytest.mark.parametrize(
    ("size", "valid", "accepted"),
    [
        (16383, True, True),
        (16384, True, True),
        (16385, False, True),
        (17407, False, True),
        (17408, False, True),
        (17409, False, False),
    ],
)
def test_the_16_kib_limit_and_the_tolerance(
    unit: str, size: int, valid: bool, accepted: bool
) -> None:
    value = _settings_of(size, unit)
    assert session_settings_size(value) == size
    if valid:
        validate_session_settings(value)
    else:
        with pytest.raises(ValueError, match=f"are {size} bytes of JSON, more than 16384"):
            validate_session_settings(value)
    assert accepts_session_settings_update(value) is accepted
    failure = start_session_settings_failure(value)
    if accepted:
        assert failure is None
    else:
        assert failure == (
            "invalid start session settings: session settings are 17409 bytes of JSON, "
            "more than 17408 (MAX_SESSION_SETTINGS_BYTES + SESSION_SETTINGS_SIZE_TOLERANCE_BYTES)"
        )


def test_multi_byte_characters_count_their_utf8_bytes() -> None:
    # 16376 bytes of text: 4094 four-byte characters, escaping none of them.
    value = {"k": "😀" * 4094}
    assert session_settings_size(value) == 16384
    validate_session_settings(value)
    value = {"k": "😀" * 4094 + "a"}
    assert session_settings_size(value) == 16385
    with pytest.raises(ValueError, match="16385 bytes"):
        validate_session_settings(value)


class _Opaque:
    pass


_CYCLE: dict[str, Any] = {"a": []}
_CYCLE["a"].append(_CYCLE)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["model"], r"must be a JSON object \(a mapping with string keys\), not list"),
        ("model", r"must be a JSON object \(a mapping with string keys\), not str"),
        (None, r"must be a JSON object \(a mapping with string keys\), not NoneType"),
        ({1: "a"}, r"session settings has the key 1 of type int; JSON object keys must be strings"),
        ({"a": {None: 1}}, r"settings\['a'\] has the key None of type NoneType"),
        ({"a": float("nan")}, r"session settings\['a'\] is nan, which JSON cannot hold"),
        ({"a": [1, float("inf")]}, r"settings\['a'\]\[1\] is inf, which JSON cannot hold"),
        ({"a": -float("inf")}, "is -inf, which JSON cannot hold"),
        ({"a": {"b"}}, r"settings\['a'\] is of type set, which is not a JSON value"),
        ({"a": b"x"}, "is of type bytes, which is not a JSON value"),
        ({"a": _Opaque()}, "is of type _Opaque, which is not a JSON value"),
        (_CYCLE, r"settings\['a'\]\[0\] contains itself"),
        ({"a": "\ud800"}, "not valid Unicode"),
    ],
)
def test_what_is_not_a_json_object_is_refused_by_name(settings: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        session_settings_size(settings)
    with pytest.raises(ValueError, match=message):
        validate_session_settings(settings)
    if settings is not None:
        assert accepts_session_settings_update(settings) is False
        failure = start_session_settings_failure(settings)
        assert failure is not None
        assert failure.startswith("invalid start session settings: ")


def test_deep_nesting_is_refused_without_a_recursion_error() -> None:
    value: dict[str, Any] = {}
    inner = value
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(ValueError, match="nested more than 256 levels deep"):
        validate_session_settings(value)
    assert accepts_session_settings_update(value) is False


@pytest.mark.parametrize(("depth", "accepted"), [(256, True), (257, False), (400, False)])
def test_settings_are_refused_past_the_depth_the_wire_converters_take(
    depth: int, accepted: bool
) -> None:
    # Nested 400 deep passed the JSON check and then broke cattrs with a RecursionError.
    value: dict[str, Any] = {}
    inner = value
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    assert accepts_session_settings_update(value) is accepted
    if accepted:
        to_wire(TurnSessionSettings(turn_id="t1", settings=value))


def test_an_int_too_long_to_write_is_refused_naming_the_settings() -> None:
    with pytest.raises(ValueError, match="session settings cannot be written as JSON"):
        validate_session_settings({"n": 10**5000})


def test_shared_references_are_not_cycles() -> None:
    shared = {"x": 1}
    assert session_settings_size({"a": shared, "b": [shared, shared]}) == 35


@pytest.mark.parametrize(
    ("settings", "accepted"),
    [
        (None, False),
        ({}, True),
        ({"model": "openai/gpt-5-mini"}, True),
        ([], False),
    ],
)
def test_update_acceptance(settings: Any, accepted: bool) -> None:
    assert accepts_session_settings_update(settings) is accepted


@pytest.mark.parametrize(("settings"), [None, {}, {"model": "openai/gpt-5"}])
def test_valid_start_settings_do_not_fail_the_session(settings: Any) -> None:
    assert start_session_settings_failure(settings) is None


def test_the_start_failure_reason_starts_with_the_prefix() -> None:
    assert invalid_start_session_settings_reason("not a JSON object") == (
        "invalid start session settings: not a JSON object"
    )


@pytest.mark.parametrize(
    ("copy", "turn_id", "expected"),
    [
        (None, "turn-1", {}),
        (TurnSessionSettings(turn_id="turn-3", settings={"model": "a"}), "turn-3", {"model": "a"}),
        (TurnSessionSettings(turn_id="turn-2", settings={"model": "a"}), "turn-3", {}),
        (TurnSessionSettings(turn_id="turn-3", settings={}), "turn-3", {}),
    ],
)
def test_a_turn_reads_only_its_own_copy(
    copy: TurnSessionSettings | None, turn_id: str, expected: dict[str, Any]
) -> None:
    assert read_turn_settings(copy, turn_id) == expected


@pytest.mark.parametrize(
    ("settings", "expected"),
    [(None, {}), ({}, {}), ({"model": "a"}, {"model": "a"})],
)
def test_the_turn_copy_is_tagged_with_the_turn(
    settings: Mapping[str, Any] | None, expected: dict[str, Any]
) -> None:
    copy = copy_settings_for_turn(settings, "turn-5")
    assert copy == TurnSessionSettings(turn_id="turn-5", settings=expected)
    assert read_turn_settings(copy, "turn-5") == expected
    assert read_turn_settings(copy, "turn-6") == {}
