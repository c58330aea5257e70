"""The ``FlowStore`` contract: attribute values and Channel messages.

Each test runs on both stores (the ``store`` fixture of conftest.py), which must give
the same results.
"""

from __future__ import annotations

import pytest

from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import at

# Attribute values


def test_attribute_values_are_set_read_listed_by_key_and_unset(store: FlowStore) -> None:
    def work(tx: StoreTransaction) -> None:
        tx.put_value("f1", "notes", "", '"one"')
        tx.put_value("f1", "notes", "", '"two"')
        tx.put_value("f1", "tasks", "b", "2")
        tx.put_value("f1", "tasks", "a", "1")
        tx.put_value("f2", "tasks", "c", "3")
        tx.delete_value("f1", "tasks", "never-set")

    store.run(work)
    assert store.run(lambda tx: tx.get_value("f1", "notes", "")) == '"two"'
    assert store.run(lambda tx: tx.get_value("f1", "missing", "")) is None
    values = store.run(lambda tx: tx.get_values("f1", "tasks"))
    assert list(values.items()) == [("a", "1"), ("b", "2")]
    store.run(lambda tx: tx.delete_value("f1", "tasks", "a"))
    assert store.run(lambda tx: tx.get_values("f1", "tasks")) == {"b": "2"}
    assert store.run(lambda tx: tx.get_values("f1", "nothing")) == {}


def test_write_once_values_read_as_every_value_does(store: FlowStore) -> None:
    def write(tx: StoreTransaction) -> None:
        tx.put_value("f1", "chunks", "00002", "2")
        tx.put_value("f1", "chunks", "00001", "1")
        tx.put_value("f2", "chunks", "00001", "other")

    store.run(write)
    assert list(store.run(lambda tx: tx.get_write_once_values("f1", "chunks")).items()) == [
        ("00001", "1"),
        ("00002", "2"),
    ]
    store.run(lambda tx: tx.delete_value("f1", "chunks", "00001"))
    store.run(lambda tx: tx.put_value("f1", "chunks", "00003", "3"))
    assert store.run(lambda tx: tx.get_write_once_values("f1", "chunks")) == {
        "00002": "2",
        "00003": "3",
    }
    # A rewrite breaks the write-once contract, but through the store it is still seen.
    store.run(lambda tx: tx.put_value("f1", "chunks", "00002", "rewritten"))
    assert store.run(lambda tx: tx.get_write_once_values("f1", "chunks"))["00002"] == "rewritten"
    assert store.run(lambda tx: tx.get_write_once_values("f1", "none")) == {}
    assert store.run(lambda tx: tx.get_write_once_values("f2", "chunks")) == {"00001": "other"}


def test_write_once_values_read_by_key_are_those_set(store: FlowStore) -> None:
    def write(tx: StoreTransaction) -> None:
        for key in ("00001", "00002", "00003"):
            tx.put_value("f1", "chunks", key, f"value {key}")

    store.run(write)
    keyed = store.run(lambda tx: tx.get_write_once_values("f1", "chunks", ["00003", "00001"]))
    assert list(keyed.items()) == [("00001", "value 00001"), ("00003", "value 00003")]
    assert store.run(lambda tx: tx.get_write_once_values("f1", "chunks", ["00009"])) == {}
    assert store.run(lambda tx: tx.get_write_once_values("f1", "chunks", [])) == {}
    store.run(lambda tx: tx.delete_value("f1", "chunks", "00003"))
    assert store.run(lambda tx: tx.get_write_once_values("f1", "chunks", ["00003"])) == {}


# Channel messages


def test_only_consumed_messages_are_deleted_for_good(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> list[int]:
        return [tx.append_message("f1", "inbox", "", f"m{n}", '"x"', at(n)) for n in range(3)]

    seqs = store.run(append)
    store.run(lambda tx: tx.consume_messages(seqs[:2]))
    store.run(lambda tx: tx.delete_consumed_messages(seqs))
    left = store.run(lambda tx: tx.pending_messages("f1", "inbox", ""))
    assert [message.message_id for message in left] == ["m2"]
    # A deleted message is gone: restoring it brings nothing back, and its ID is free.
    store.run(lambda tx: tx.restore_messages(seqs[:2]))
    assert len(store.run(lambda tx: tx.pending_messages("f1", "inbox", ""))) == 1
    store.run(lambda tx: tx.append_message("f1", "inbox", "", "m0", '"y"', at(9)))


def test_messages_are_first_in_first_out_and_consumed_once(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> list[int]:
        return [
            tx.append_message("f1", "inbox", "", "m1", '"a"', at(1)),
            tx.append_message("f1", "inbox", "", "m2", '"b"', at(2)),
            tx.append_message("f1", "other", "", "m3", '"c"', at(3)),
            tx.append_message("f1", "inbox", "", "m4", '"d"', at(4)),
        ]

    seqs = store.run(append)
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == 4
    pending = store.run(lambda tx: tx.pending_messages("f1", "inbox", ""))
    assert [(m.message_id, m.value, m.seq) for m in pending] == [
        ("m1", '"a"', seqs[0]),
        ("m2", '"b"', seqs[1]),
        ("m4", '"d"', seqs[3]),
    ]
    assert pending[0].channel == "inbox"
    assert pending[0].created_at == at(1)
    store.run(lambda tx: tx.consume_messages([seqs[0], seqs[1]]))
    left = store.run(lambda tx: tx.pending_messages("f1", "inbox", ""))
    assert [m.message_id for m in left] == ["m4"]
    with pytest.raises(ValueError, match="a Channel message with ID 'm1' is already stored"):
        store.run(lambda tx: tx.append_message("f1", "inbox", "", "m1", "1", at(5)))


def test_channel_map_keys_with_pending_messages_come_oldest_first(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> None:
        for number, key in enumerate(["zeta", "alpha", "zeta", "mid"]):
            tx.append_message("f1", "replies", key, f"m{number}", "1", at(number))
        tx.append_message("f2", "replies", "other-flow", "x", "1", at(9))

    store.run(append)
    assert store.run(lambda tx: tx.pending_channel_keys("f1", "replies")) == [
        "zeta",
        "alpha",
        "mid",
    ]
    alpha = store.run(lambda tx: tx.pending_messages("f1", "replies", "alpha"))
    store.run(lambda tx: tx.consume_messages([alpha[0].seq]))
    assert store.run(lambda tx: tx.pending_channel_keys("f1", "replies")) == ["zeta", "mid"]
    assert store.run(lambda tx: tx.pending_channel_keys("f1", "nothing")) == []


def test_only_an_unconsumed_message_of_the_flow_can_be_deleted(store: FlowStore) -> None:
    def append(tx: StoreTransaction) -> list[int]:
        return [tx.append_message("f1", "inbox", "", f"m{n}", "1", at(n)) for n in range(3)]

    seqs = store.run(append)
    store.run(lambda tx: tx.consume_messages([seqs[0]]))
    assert store.run(lambda tx: tx.delete_message("f1", "m0")) is False
    assert store.run(lambda tx: tx.delete_message("f2", "m1")) is False
    assert store.run(lambda tx: tx.delete_message("f1", "unknown")) is False
    assert store.run(lambda tx: tx.delete_message("f1", "m1")) is True
    assert store.run(lambda tx: tx.delete_message("f1", "m1")) is False
    pending = store.run(lambda tx: tx.pending_messages("f1", "inbox", ""))
    assert [m.message_id for m in pending] == ["m2"]
    new_seq = store.run(lambda tx: tx.append_message("f1", "inbox", "", "m1", "2", at(5)))
    assert new_seq > seqs[2]
