"""Message sequence keys and the storage options: the spec's numbers and refusals."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.windowing import (
    DEFAULT_MESSAGE_CHUNK_MAX_BYTES,
    DEFAULT_MESSAGE_CHUNK_SIZE,
    DEFAULT_MESSAGE_WINDOW_SIZE,
    DEFAULT_RETAINED_MESSAGE_LIMIT,
    MAX_CHUNK_BYTES_PER_COMMIT,
    MAX_CHUNKS_PER_COMMIT,
    MAX_MESSAGE_CHUNK_BYTES,
    MessageStorageOptions,
    message_sequence_key,
    parse_message_sequence_key,
    validate_message_storage_options,
)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("window", DEFAULT_MESSAGE_WINDOW_SIZE, 64),
        ("chunk size", DEFAULT_MESSAGE_CHUNK_SIZE, 32),
        ("chunk bytes", DEFAULT_MESSAGE_CHUNK_MAX_BYTES, 1_048_576),
        ("max chunk bytes", MAX_MESSAGE_CHUNK_BYTES, 8_388_608),
        ("chunks per commit", MAX_CHUNKS_PER_COMMIT, 4),
        ("bytes per commit", MAX_CHUNK_BYTES_PER_COMMIT, 8_388_608),
        ("retained limit", DEFAULT_RETAINED_MESSAGE_LIMIT, 1_000),
    ],
)
def test_storage_numbers(name: str, value: int, expected: int) -> None:
    assert value == expected, name


def test_default_options_are_the_spec_defaults() -> None:
    options = MessageStorageOptions()
    assert (
        options.message_window_size,
        options.message_chunk_size,
        options.message_chunk_max_bytes,
        options.retained_message_limit,
    ) == (64, 32, 1024 * 1024, 1_000)


def test_options_change_with_replace_and_are_frozen() -> None:
    options = dataclasses.replace(MessageStorageOptions(), retained_message_limit=None)
    assert options.retained_message_limit is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.message_window_size = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("sequence", "key"),
    [
        (1, "000000000001"),
        (42, "000000000042"),
        (1_000, "000000001000"),
        (10**12 - 1, "999999999999"),
    ],
)
def test_message_sequence_key(sequence: int, key: str) -> None:
    assert message_sequence_key(sequence) == key
    assert parse_message_sequence_key(key) == sequence


@pytest.mark.parametrize("sequence", [0, -1, 10**12, 10**13])
def test_message_sequence_key_refuses_out_of_range(sequence: int) -> None:
    with pytest.raises(ValueError, match=f"between 1 and 999999999999, not {sequence}"):
        message_sequence_key(sequence)


@pytest.mark.parametrize("sequence", [True, 1.0, "1"])
def test_message_sequence_key_refuses_non_ints(sequence: Any) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        message_sequence_key(sequence)


@pytest.mark.parametrize(
    "key", ["", "1", "00000000001", "0000000000001", "00000000000a", "-00000000001", "000000000000"]
)
def test_parse_message_sequence_key_refuses_other_text(key: str) -> None:
    with pytest.raises(ValueError, match="message sequence key"):
        parse_message_sequence_key(key)


def test_parse_refuses_non_ascii_digits() -> None:
    with pytest.raises(ValueError, match="12 decimal digits"):
        parse_message_sequence_key("٠٠٠٠٠٠٠٠٠٠٠١")


@settings(max_examples=100, deadline=None)
@given(a=st.integers(1, 10**12 - 1), b=st.integers(1, 10**12 - 1))
def test_keys_sort_in_sequence_order(a: int, b: int) -> None:
    assert (message_sequence_key(a) < message_sequence_key(b)) == (a < b)
    assert parse_message_sequence_key(message_sequence_key(a)) == a


_VALID: dict[str, Any] = {
    "message_window_size": 64,
    "message_chunk_size": 32,
    "message_chunk_max_bytes": 1024 * 1024,
    "retained_message_limit": 1_000,
}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("message_window_size", 0, "message_window_size must be at least 1, not 0"),
        ("message_chunk_size", 0, "message_chunk_size must be at least 1, not 0"),
        ("message_chunk_max_bytes", 0, "message_chunk_max_bytes must be between 1 and 8388608"),
        (
            "message_chunk_max_bytes",
            8 * 1024 * 1024 + 1,
            "message_chunk_max_bytes must be between 1 and 8388608",
        ),
        ("retained_message_limit", 0, "retained_message_limit must be None or at least 1, not 0"),
    ],
)
def test_invalid_options_name_the_field(field: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_message_storage_options(**{**_VALID, field: value})
    with pytest.raises(ValueError, match=message):
        MessageStorageOptions(**{**_VALID, field: value})


@pytest.mark.parametrize("field", sorted(_VALID))
def test_non_int_options_are_refused(field: str) -> None:
    with pytest.raises(TypeError, match=f"{field} must be an int"):
        validate_message_storage_options(**{**_VALID, field: 1.5})


@pytest.mark.parametrize(
    "overrides",
    [
        {"message_window_size": 1, "message_chunk_size": 1},
        {"message_chunk_max_bytes": 1},
        {"message_chunk_max_bytes": 8 * 1024 * 1024},
        {"retained_message_limit": None},
        {"retained_message_limit": 1},
    ],
)
def test_boundary_options_are_accepted(overrides: dict[str, Any]) -> None:
    validate_message_storage_options(**{**_VALID, **overrides})
