"""How the SQLite store keeps value text: which values are compressed, and reading them back."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import (
    SqliteFlowStore,
    StoreCorruptError,
)
from dex_agents.adapters.local.store_errors import StoredValueError
from dex_agents.adapters.local.stored_text import (
    COMPRESSED_FROM_CHARS,
    DICTIONARY_EVENT,
    EVENT_DICTIONARY,
    FAST_COMPRESSION_FROM_CHARS,
    HISTORY_DICTIONARY,
    HISTORY_FIELD,
    ZLIB_VALUE,
    pack_event,
    pack_history_field,
    pack_value,
    unpack,
)
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.flow_store_rows import add_executions, add_flows, at, execution, flow

LONG = json.dumps({"messages": [{"text": f"message {n}", "role": "user"} for n in range(200)]})

EVENT = json.dumps(
    {
        "attempt": 1,
        "payload": {"text": "I looked it up: order 7 shipped on Monday."},
        "step_execution_id": "RunModel-12",
        "turn_id": "turn-6",
        "type": "text_delta",
    },
    separators=(",", ":"),
)


@pytest.mark.parametrize(
    ("text", "compressed"),
    [
        ("", False),
        ('"short"', False),
        ("x" * (COMPRESSED_FROM_CHARS - 1), False),
        ("x" * COMPRESSED_FROM_CHARS, True),
        (LONG, True),
        (json.dumps({"text": "Grüße, 你好, 🥾" * 400}, ensure_ascii=False), True),
    ],
    ids=["empty", "short", "just-under", "at-the-threshold", "long-json", "non-ascii"],
)
def test_a_value_is_compressed_from_the_threshold_and_reads_back_the_same(
    text: str, compressed: bool
) -> None:
    stored = pack_value(text)
    assert isinstance(stored, bytes) is compressed
    if compressed:
        assert stored[0] == ZLIB_VALUE
        assert len(stored) < len(text.encode("utf-8"))
    else:
        assert stored is text
    assert unpack(stored) == text


_BIG = json.dumps({"output": " ".join(f"line {n} of a file a tool read" for n in range(4000))})


@pytest.mark.parametrize(
    ("text", "level"),
    [
        (LONG, 6),
        (_BIG[: FAST_COMPRESSION_FROM_CHARS - 1], 6),
        (_BIG[:FAST_COMPRESSION_FROM_CHARS], 1),
        (_BIG, 1),
    ],
    ids=["long", "just-under-fast", "at-fast", "big"],
)
def test_a_big_value_is_compressed_at_the_fastest_level_and_reads_back_the_same(
    text: str, level: int
) -> None:
    stored = pack_value(text)
    assert stored == bytes((ZLIB_VALUE,)) + zlib.compress(text.encode("utf-8"), level)
    assert unpack(stored) == text


@pytest.mark.parametrize(
    ("text", "compressed"),
    [(EVENT, True), ('{"a":1}', False), ("", False)],
    ids=["agent-event", "tiny", "empty"],
)
def test_an_event_is_compressed_only_when_that_makes_it_shorter(
    text: str, compressed: bool
) -> None:
    stored = pack_event(text)
    assert isinstance(stored, bytes) is compressed
    if isinstance(stored, bytes):
        assert stored[0] == DICTIONARY_EVENT
        # The dictionary is what makes an event this small worth compressing at all.
        assert len(stored) < len(text) / 2 < len(zlib.compress(text.encode()))
    assert unpack(stored) == text


def test_the_event_dictionary_is_the_one_stored_events_were_written_with() -> None:
    # Every stored event of format 2 needs these exact bytes to be read again: a
    # changed dictionary is a new format byte, never an edit of this one.
    assert hashlib.sha256(EVENT_DICTIONARY).hexdigest() == (
        "91563b6af2989409de780e356d0be5ac8c09660e43b285d9dbf12f245d16b338"
    )


OPTIONS = (
    '{"durability":"sync","execute_timeout":7200.0,"failure_step":"RecordToolFailure",'
    '"heartbeat_timeout":60.0,"loads":[["AgentToolCalls","call_2365f0107b56baca_0"]],'
    '"locks":[],"retry":{"backoff_coefficient":2.0,"initial_interval":1.0,'
    '"maximum_attempts":3,"maximum_interval":60.0,"total_duration":null},"wait_loads":[]}'
)
WAIT = (
    '[{"channel":"TurnControlRequests","count":1,"key":null},'
    '{"channel":"QueuedUserMessages","count":1,"key":null}]'
)


@pytest.mark.parametrize(
    ("text", "most_bytes"),
    [(OPTIONS, 40), (WAIT, 20), ('{"other":"shape","of":["json"]}', None), ("", None)],
    ids=["tool-options", "user-wait", "unknown-shape", "empty"],
)
def test_a_finished_executions_field_is_compressed_only_when_that_makes_it_shorter(
    text: str, most_bytes: int | None
) -> None:
    stored = pack_history_field(text)
    if most_bytes is None:
        assert stored == text
    else:
        assert isinstance(stored, bytes)
        assert stored[0] == HISTORY_FIELD
        assert len(stored) <= most_bytes
    assert unpack(stored) == text


def test_the_history_dictionary_is_the_one_stored_fields_were_written_with() -> None:
    assert hashlib.sha256(HISTORY_DICTIONARY).hexdigest() == (
        "85a49ac796cbea312263fcf6815c5a4592a5941c18a64e686f80791a4066a73a"
    )


def _compressed(stored: str | bytes) -> bytes:
    assert isinstance(stored, bytes)
    return stored


def _flipped(stored: str | bytes, at: int) -> bytes:
    damaged = bytearray(_compressed(stored))
    damaged[at] ^= 0xFF
    return bytes(damaged)


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        (_flipped(pack_value(LONG), 40), "a stored value does not decompress"),
        (_flipped(pack_event(EVENT), 20), "a stored value does not decompress"),
        (_compressed(pack_event(EVENT))[:-6], "a stored value does not decompress"),
        (_flipped(pack_history_field(OPTIONS), 12), "a stored value does not decompress"),
        (bytes((ZLIB_VALUE,)) + zlib.compress(b"\xff\xfe"), "a stored value does not decompress"),
        (b"\x07" + zlib.compress(b'"text"'), "a stored value is 15 bytes in no known format"),
        (b"", "a stored value is 0 bytes in no known format"),
    ],
    ids=[
        "value-checksum",
        "event-checksum",
        "event-cut-short",
        "history-checksum",
        "not-utf8",
        "format",
        "empty",
    ],
)
def test_damaged_stored_bytes_are_an_error_never_other_text(stored: bytes, message: str) -> None:
    with pytest.raises(StoredValueError, match=re.escape(message)):
        unpack(stored)


def test_a_long_value_read_again_is_the_same_text_object() -> None:
    # The decoded-value cache then finds it by identity instead of hashing it again.
    stored = _compressed(pack_value(LONG))
    assert unpack(stored) is unpack(bytes(stored))


def test_reading_many_execution_fields_keeps_the_long_values_read_before() -> None:
    # A running execution's options are read again while it runs, so their text is kept
    # too, but apart: listing a Step history reads fields of up to 1,000 executions.
    long_text = unpack(_compressed(pack_value(LONG)))
    fields = [
        _compressed(pack_history_field(OPTIONS.replace("RecordToolFailure", f"S{n}")))
        for n in range(600)
    ]
    assert unpack(fields[-1]) is unpack(bytes(fields[-1]))
    for field in fields:
        unpack(field)
    assert unpack(_compressed(pack_value(LONG))) is long_text


def _raw(path: Path, sql: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def test_the_store_writes_long_values_and_events_compressed_and_reads_them_as_text(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    add_flows(store, flow("f1"))

    def write(tx: StoreTransaction) -> None:
        tx.put_value("f1", "chunks", "0001", LONG)
        tx.put_value("f1", "state", "", LONG)
        tx.put_value("f1", "small", "", '"small"')
        tx.append_event("Agent", "f1", EVENT, "s", at(1))

    store.run(write)
    store.close()
    rows = _raw(path, "SELECT name, typeof(value) FROM attribute_values")
    assert {str(name): kind for name, kind in rows} == {
        "chunks": "blob",
        "state": "blob",
        "small": "text",
    }
    [(kind, size)] = _raw(path, "SELECT typeof(value), size FROM stream_events")
    assert (kind, size) == ("blob", len(EVENT.encode("utf-8")))  # capacity counts the text

    fresh = SqliteFlowStore(path)
    try:
        assert fresh.run(lambda tx: tx.get_value("f1", "chunks", "0001")) == LONG
        assert fresh.run(lambda tx: tx.get_values("f1", "chunks")) == {"0001": LONG}
        assert fresh.run(lambda tx: tx.get_write_once_values("f1", "chunks")) == {"0001": LONG}
        assert fresh.run(lambda tx: tx.get_singletons("f1", ["state", "small"])) == {
            "state": LONG,
            "small": '"small"',
        }
        [event] = fresh.run(lambda tx: tx.events_after("f1", 0, 10))
        assert event.value == EVENT
        assert fresh.run(lambda tx: tx.get_event(event.id)) == event
    finally:
        fresh.close()


def test_a_damaged_compressed_value_is_reported_as_damage_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    add_flows(store, flow("f1"))
    store.run(lambda tx: tx.put_value("f1", "chunks", "0001", LONG))
    store.close()
    connection = sqlite3.connect(path)
    with connection:
        [(stored,)] = connection.execute("SELECT value FROM attribute_values").fetchall()
        connection.execute("UPDATE attribute_values SET value = ?", (_flipped(stored, 40),))
    connection.close()
    damaged = SqliteFlowStore(path)
    try:
        with pytest.raises(StoreCorruptError) as raised:
            damaged.run(lambda tx: tx.get_value("f1", "chunks", "0001"))
    finally:
        damaged.close()
    assert str(raised.value).startswith(
        f"{path} is damaged: the stored value of Attribute 'chunks', key '0001', of Flow run 'f1'"
        " could not be read: a stored value does not decompress"
    )


def test_an_executions_long_fields_are_stored_compressed_and_read_as_text(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    add_flows(store, flow("f1"))
    fields = {"options": OPTIONS, "wait": WAIT, "wait_result": '{"channel":"x"}'}
    try:
        [active] = add_executions(store, execution("f1", **fields))
        # Options are packed from the first write; the wait once the execution finishes.
        assert _raw(path, "SELECT typeof(options), typeof(wait) FROM step_executions") == [
            ("blob", "text")
        ]
        row = store.run(lambda tx: tx.get_execution(active))
        assert row is not None
        store.run(lambda tx: tx.update_execution(replace(row, status=ExecutionStatus.COMPLETED)))
        assert _raw(path, "SELECT typeof(options), typeof(wait) FROM step_executions") == [
            ("blob", "blob")
        ]
        fresh = SqliteFlowStore(path)
        try:
            [finished] = fresh.read(lambda tx: tx.flow_executions("f1"))
        finally:
            fresh.close()
        assert finished == replace(row, status=ExecutionStatus.COMPLETED)
    finally:
        store.close()
