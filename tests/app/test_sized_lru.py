"""SizedLru: bounded in entries and in the size (or memory) of its values, least recently used
dropped first."""

from __future__ import annotations

from dex_agents.app.sized_lru import SizedLru
from dex_agents.domain.kept_memory import CACHE_ENTRY_BYTES, MemoryRate, memory_of


def _lru(entries: int = 3, total: int = 10) -> SizedLru[str]:
    return SizedLru(entries, total, len)


def test_the_least_recently_used_goes_first_when_entries_run_out() -> None:
    lru = _lru(entries=2)
    lru.put("a", "x")
    lru.put("b", "y")
    assert lru.get("a") == "x"  # now the most recently used
    lru.put("c", "z")
    assert (lru.get("a"), lru.get("b"), lru.get("c")) == ("x", None, "z")
    assert len(lru) == 2


def test_values_together_stay_within_the_total_size() -> None:
    lru = _lru(total=10)
    lru.put("a", "xxxx")
    lru.put("b", "yyyy")
    lru.put("c", "zzzz")  # 12 > 10: "a" goes
    assert (lru.get("a"), lru.get("b"), lru.get("c")) == (None, "yyyy", "zzzz")
    lru.put("b", "y")  # a smaller value for a key frees what the old one held
    lru.put("d", "ddddd")
    assert (lru.get("b"), lru.get("c"), lru.get("d")) == ("y", "zzzz", "ddddd")


def test_a_value_larger_than_the_total_is_not_kept_and_drops_the_keys_old_one() -> None:
    lru = _lru(total=10)
    lru.put("a", "x")
    lru.put("a", "x" * 11)
    assert lru.get("a") is None
    assert len(lru) == 0
    lru.put("b", "y")
    lru.clear()
    assert (len(lru), lru.get("b")) == (0, None)


def test_with_a_rate_values_are_charged_their_memory_not_their_size() -> None:
    rate = MemoryRate(first=1)
    one = memory_of(("a" * 10,)) + CACHE_ENTRY_BYTES  # and what the maps take for it
    lru: SizedLru[str] = SizedLru(10, 3 * one, len, rate=rate)
    lru.put("a", "a" * 10)  # a str of 10 characters takes 59 bytes: 5.9 a character
    assert lru.held == one
    lru.put("b", "b" * 10)
    lru.put("c", "c" * 10)
    assert len(lru) == 3
    lru.put("d", "d" * 10)  # four of them pass the bound, though 40 characters would not
    assert (lru.get("a"), len(lru)) == (None, 3)


def test_with_a_rate_a_value_charged_more_than_the_total_is_not_kept() -> None:
    lru: SizedLru[str] = SizedLru(10, 100 + CACHE_ENTRY_BYTES, len, rate=MemoryRate(first=1))
    lru.put("a", "a" * 60)  # 60 characters, 109 bytes, and what the maps take for it
    assert (lru.get("a"), len(lru), lru.held) == (None, 0, 0)
