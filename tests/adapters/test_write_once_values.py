"""The SQLite store's kept write-once text: per map, bounded, forgetting what is written."""

from __future__ import annotations

import pytest

from dex_agents.adapters.local.write_once_values import WriteOnceValues


def test_kept_values_come_back_in_the_order_asked_and_only_those_kept() -> None:
    kept = WriteOnceValues()
    kept.keep("f1", "chunks", {"002": "b", "001": "a"})
    assert list(kept.known("f1", "chunks", ["001", "002", "003"]).items()) == [
        ("001", "a"),
        ("002", "b"),
    ]
    assert kept.known("f1", "other", ["001"]) == {}
    assert kept.known("f2", "chunks", ["001"]) == {}


def test_a_write_or_delete_forgets_its_key() -> None:
    kept = WriteOnceValues()
    kept.keep("f1", "chunks", {"001": "a", "002": "b"})
    kept.forget("f1", "chunks", "001")
    kept.forget("f1", "chunks", "009")
    assert kept.known("f1", "chunks", ["001", "002"]) == {"002": "b"}


def test_the_map_loaded_least_recently_loses_its_values_first_past_the_bound() -> None:
    kept = WriteOnceValues(max_bytes=100)
    kept.keep("f1", "chunks", {"001": "x" * 20})
    kept.keep("f2", "chunks", {"001": "y" * 20})
    kept.known("f1", "chunks", ["001"])  # f1 is now the most recently loaded
    kept.keep("f3", "chunks", {"001": "z" * 25, "002": "z" * 25, "003": "z" * 25})
    assert kept.known("f2", "chunks", ["001"]) == {}
    assert kept.known("f1", "chunks", ["001"]) == {"001": "x" * 20}
    assert len(kept.known("f3", "chunks", ["001", "002", "003"])) == 3
    # A value larger than a quarter of the bound is never kept.
    kept.keep("f4", "chunks", {"001": "w" * 26})
    assert kept.known("f4", "chunks", ["001"]) == {}


def test_a_map_that_alone_outgrows_the_bound_keeps_its_newest_values() -> None:
    kept = WriteOnceValues(max_bytes=100)
    keys = [f"00{n}" for n in range(1, 10)]
    kept.keep("f1", "chunks", {key: key[-1] * 20 for key in keys[:7]})  # 140 bytes
    assert list(kept.known("f1", "chunks", keys)) == keys[2:7]
    # The oldest, read again from the file, do not push out the newer ones.
    kept.keep("f1", "chunks", {key: key[-1] * 20 for key in keys[:2]})
    assert list(kept.known("f1", "chunks", keys)) == keys[2:7]
    # A newer value is kept, and the oldest kept one goes.
    kept.keep("f1", "chunks", {"008": "8" * 20})
    assert list(kept.known("f1", "chunks", keys)) == keys[3:8]
    # A map loaded after it takes the room of its oldest values, not of all of them.
    kept.keep("f1", "window", {"009": "9" * 25})
    assert list(kept.known("f1", "chunks", keys)) == keys[5:8]
    assert kept.known("f1", "window", ["009"]) == {"009": "9" * 25}


@pytest.mark.parametrize(
    ("keys", "whole"),
    [
        ({"001", "002"}, {"001": "a", "002": "b"}),
        ({"001"}, None),  # a key kept beyond those asked
        ({"001", "002", "003"}, None),  # a key not kept
        ({"001", "003"}, None),
        (set(), None),
    ],
    ids=["exactly the kept keys", "fewer", "one more", "another", "none"],
)
def test_the_whole_map_comes_back_only_when_every_key_and_no_other_is_kept(
    keys: set[str], whole: dict[str, str] | None
) -> None:
    kept = WriteOnceValues()
    kept.keep("f1", "chunks", {"002": "b", "001": "a"})
    assert kept.known_all("f1", "chunks", keys) == whole
    assert kept.known_all("f2", "chunks", keys) is None


def test_the_whole_map_is_a_copy_the_caller_may_change() -> None:
    kept = WriteOnceValues()
    kept.keep("f1", "chunks", {"001": "a"})
    whole = kept.known_all("f1", "chunks", {"001"})
    assert whole == {"001": "a"}
    whole["002"] = "b"
    assert kept.known_all("f1", "chunks", {"001"}) == {"001": "a"}
